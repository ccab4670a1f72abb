#!/usr/bin/env bash
# Run a produce-audit job with spark-submit, from a project virtualenv that this script keeps up to date.
#
#   ./spark-submit.sh [SPARK-SUBMIT OPTIONS] JOB [ARGS]
#
# JOB is run, ingest, audit, report or vacuum (jobs/JOB.py); ARGS are those of `produce-audit JOB --help`.
# Environment:
#   PRODUCE_AUDIT_VENV  an existing virtualenv with produce-audit installed; used as is, nothing is installed
#                       (default: .venv beside this script, created and refreshed when pyproject.toml changes)
#   PYTHON              interpreter that creates .venv (default: python3.11)
#   SPARK_MASTER        master when no --master is given (default: local[*])
#   PRODUCE_AUDIT_EXECUTOR_ENV
#                       on a cluster: a packed environment (local path or URI) to ship to the executors instead of
#                       build/produce-audit-env.tar.gz, which this script packs with venv-pack otherwise
#   EXECUTOR_PYTHON_PREFIX
#                       on a cluster: where the executors' machines have Python 3.11 (venv-pack --python-prefix),
#                       when not at the same place as on this machine
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JOBS=(run ingest audit report vacuum)
VENV="${PRODUCE_AUDIT_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3.11}"
LIBS_ZIP="$ROOT/build/produce_audit_libs.zip"
EXECUTOR_ENV_ARCHIVE="$ROOT/build/produce-audit-env.tar.gz"

usage() {
    cat <<EOF
usage: $(basename "$0") [SPARK-SUBMIT OPTIONS] JOB [ARGS]

jobs:
  run      ingest, audit and report in one go
  ingest   load Kafka log roots into the batches table
  audit    audit the batches table of a warehouse
  report   summarise an audit run

examples:
  $(basename "$0") run --input samples/basic --warehouse ./warehouse
  $(basename "$0") --master yarn --deploy-mode client run --input hdfs:///kafka/logs --warehouse hdfs:///audit/wh
  $(basename "$0") JOB --help
EOF
}

die() {
    echo "spark-submit.sh: $*" >&2
    exit 2
}

# Split the command line at the job name: spark-submit options come before it, job arguments after it.
submit_args=()
master=""
user_py_files=""
user_archives=""
user_properties=""
while (($#)); do
    case "$1" in
        -h | --help) usage; exit 0 ;;
        --master) (($# >= 2)) || die "--master needs a value"; master="$2"; shift 2 ;;
        --master=*) master="${1#--master=}"; shift ;;
        --py-files) (($# >= 2)) || die "--py-files needs a value"; user_py_files="$2"; shift 2 ;;
        --py-files=*) user_py_files="${1#--py-files=}"; shift ;;
        --archives) (($# >= 2)) || die "--archives needs a value"; user_archives="$2"; shift 2 ;;
        --archives=*) user_archives="${1#--archives=}"; shift ;;
        --properties-file) (($# >= 2)) || die "--properties-file needs a value"; user_properties="$2"; shift 2 ;;
        --properties-file=*) user_properties="${1#--properties-file=}"; shift ;;
        --verbose | -v | --supervise) submit_args+=("$1"); shift ;;
        --*=*) submit_args+=("$1"); shift ;;
        -*) (($# >= 2)) || die "$1 needs a value"; submit_args+=("$1" "$2"); shift 2 ;;
        *) break ;;
    esac
done
(($#)) || { usage >&2; exit 2; }
job="$1"
shift
if [[ ! " ${JOBS[*]} " =~ " $job " ]]; then
    echo "spark-submit.sh: unknown job '$job'" >&2
    usage >&2
    exit 2
fi

ensure_java() {
    local java="java"
    if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then
        java="$JAVA_HOME/bin/java"
    elif ! command -v java >/dev/null 2>&1; then
        cat >&2 <<EOF
spark-submit.sh: Java not found. Spark 4 needs Java 17 (or 21), for example:
  sudo apt-get install openjdk-17-jre-headless     # Debian, Ubuntu
  brew install openjdk@17                          # macOS
or point JAVA_HOME at an installed JDK or JRE 17.
EOF
        exit 2
    fi
    local version major
    version="$("$java" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
    major="${version%%.*}"
    if [[ "$major" =~ ^[0-9]+$ ]] && ((major < 17)); then
        die "Java $version found at $(command -v "$java"); Spark 4 needs Java 17 or later (set JAVA_HOME)"
    fi
}

ensure_venv() {
    if [[ -n "${PRODUCE_AUDIT_VENV:-}" ]]; then
        [[ -x "$VENV/bin/spark-submit" ]] || die "PRODUCE_AUDIT_VENV=$VENV has no bin/spark-submit (pip install pyspark)"
        return
    fi
    local stamp="$VENV/.produce-audit-installed"
    if [[ ! -x "$VENV/bin/python" ]]; then
        command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python 3.11 or set PYTHON"
        echo "spark-submit.sh: creating $VENV" >&2
        "$PYTHON" -m venv "$VENV"
    fi
    if [[ ! -f "$stamp" || "$ROOT/pyproject.toml" -nt "$stamp" ]]; then
        echo "spark-submit.sh: installing produce-audit into $VENV" >&2
        "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet --editable "$ROOT"
        echo "spark-submit.sh: recording the JVM class archive (produce-audit prepare)" >&2
        "$VENV/bin/produce-audit" prepare >&2 || echo "spark-submit.sh: no class archive; runs start without it" >&2
        touch "$stamp"
    fi
}

# The driver JVM maps the class archive of `produce-audit prepare` (pipeline/class_archive.py) when one exists and
# logs as `produce-audit` does (the package's log4j2.properties, pipeline/session.py): the properties file's
# spark.driver.extraJavaOptions with those flags added. Empty when the command line sets the driver's Java options.
driver_java_options() {
    local properties="$1" given
    [[ " ${submit_args[*]-} " =~ (extraJavaOptions|--driver-java-options) ]] && return
    given="$(awk '$1 == "spark.driver.extraJavaOptions" { $1 = ""; sub(/^ +/, ""); print }' "$properties")"
    "$VENV/bin/python" -c '
import sys
from pipeline.class_archive import with_archive
from pipeline.session import with_log_config
print(with_archive(with_log_config(sys.argv[1])))
' "$given"
}

# The local file system classes of `produce-audit prepare` (pipeline/local_fs.py), for a driver on this machine:
# the jar on the driver's class path and its classes as the file: file systems, one option per line; none when the
# jar is not installed or the properties file or command line set the driver's class path or a file: implementation.
local_fs_options() {
    local properties="$1"
    [[ " ${submit_args[*]-} " =~ (driver-class-path|extraClassPath|file\.impl) ]] && return
    grep -qE '^[[:space:]]*spark\.(driver\.extraClassPath|hadoop\.fs\.(AbstractFileSystem\.)?file\.impl)[[:space:]=]' \
        "$properties" 2>/dev/null && return
    "$VENV/bin/python" -c '
from pipeline.local_fs import CLASSES, installed
jar = installed()
if jar is not None:
    print("--driver-class-path", jar, *(f"--conf\n{key}={value}" for key, value in CLASSES.items()), sep="\n")
'
}

# The delta-spark jars of `produce-audit prepare` (pipeline/delta_jars.py): --jars, merged with the jars already
# given, and the Delta session extension and catalog, one option per line; none when the job's delta.backend is
# embedded, the bundle is not installed or the properties file or command line bring a Delta of their own.
delta_options() {
    local properties="$1"
    shift
    "$VENV/bin/python" -c '
import sys
from pipeline.delta_jars import submit_options
count = int(sys.argv[2])
print("\n".join(submit_options(sys.argv[1], sys.argv[3 : 3 + count], sys.argv[3 + count :])))
' "$properties" "${#submit_args[@]}" ${submit_args[@]+"${submit_args[@]}"} "$@"
}

# Executors import the pipeline and schemas packages from this zip; it is rebuilt on every submit (it is small)
# so that it never lags behind the sources.
build_libs_zip() {
    mkdir -p "$(dirname "$LIBS_ZIP")"
    (cd "$ROOT" && "$VENV/bin/python" - "$LIBS_ZIP" <<'PY'
import os
import sys
import zipfile
from pathlib import Path

target = Path(sys.argv[1])
partial = target.with_suffix(f".{os.getpid()}.tmp")
with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
    for package in ("pipeline", "schemas"):
        for path in sorted(Path(package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path)
partial.replace(target)
PY
    )
}

# Whether the executors' Python is already chosen: PYSPARK_PYTHON, or spark.pyspark.python on the command line or
# in the properties file. Then nothing is shipped for them.
executor_python_given() {
    local properties="$1"
    [[ -n "${PYSPARK_PYTHON:-}" ]] && return 0
    [[ " ${submit_args[*]-} " =~ spark\.pyspark\.python= ]] && return 0
    [[ -f "$properties" ]] && awk '$1 ~ /^spark\.pyspark\.python(=|$)/ { found = 1 } END { exit !found }' "$properties"
}

# The executors' environment, packed as Spark documents it for Python packages (venv-pack, shipped with --archives
# and run as ./environment/bin/python): the third-party packages the project needs, with all they need in turn, at
# the versions of the driver's virtualenv; without PySpark, which every executor has from its Spark installation,
# and delta-spark, whose Python half only the driver uses. The project itself goes with --py-files (build_libs_zip):
# venv-pack refuses editable installs, and a zip rebuilt on every submit never lags behind the sources.
# Those packages are in the driver's virtualenv already and are not installed again: the files of each distribution
# as its RECORD lists them (modules with their bytecode, dist-info, scripts), and those of pip and setuptools, are
# hard-linked (copied across file systems) into a virtualenv made without pip, so the executors get the driver's very
# files. pip installs venv-pack and only what cannot be taken over that way (no RECORD, an editable install, a file
# gone); installing everything again took two thirds of the time, downloading 230 MB of wheels and compiling 4,500
# modules. venv-pack compresses at level 1 instead of its default 4: the 800 MB are mostly shared libraries (numba's
# LLVM, pyarrow, deltalake) that level 4 packs into 280 MB and level 1 into 305 MB in three quarters of the time, a
# tar.gz all the same, whose 25 MB more take each executor a fraction of a second to fetch over a LAN (level 0 packs
# in a third of level 1's time but ships 845 MB). Packing takes under a minute on a busy two-core machine, and is
# redone only when those packages or their versions change.
ensure_executor_env() {
    local stamp="$EXECUTOR_ENV_ARCHIVE.stamp" build wanted site
    mkdir -p "$(dirname "$EXECUTOR_ENV_ARCHIVE")"
    build="$(mktemp -d "$EXECUTOR_ENV_ARCHIVE.XXXXXX")"
    "$VENV/bin/python" - "$ROOT/pyproject.toml" >"$build/requirements.txt" <<'PY'
import sys
import tomllib
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

driver_only = {"pyspark", "delta-spark"}
with open(sys.argv[1], "rb") as pyproject:
    pending = [Requirement(text) for text in tomllib.load(pyproject)["project"]["dependencies"]]
pins = {}
while pending:  # everything those need, at the versions the driver's virtualenv has
    requirement = pending.pop()
    name = canonicalize_name(requirement.name)
    if name in driver_only or name in pins:
        continue
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
        continue
    distribution = metadata.distribution(name)
    pins[name] = distribution.version
    pending.extend(Requirement(text) for text in distribution.requires or [])
print("\n".join(f"{name}=={version}" for name, version in sorted(pins.items())))
PY
    wanted="$(cat "$build/requirements.txt")${EXECUTOR_PYTHON_PREFIX:+
python-prefix $EXECUTOR_PYTHON_PREFIX}"
    if [[ -f "$EXECUTOR_ENV_ARCHIVE" && -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]]; then
        rm -rf "$build"
        return
    fi
    echo "spark-submit.sh: packing the executors' Python environment into $EXECUTOR_ENV_ARCHIVE (a minute or less)" >&2
    "$VENV/bin/python" -m venv --without-pip "$build/env" &&
        site="$("$build/env/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" &&
        "$VENV/bin/python" - "$build/requirements.txt" "$build/env" "$site" >"$build/to-install.txt" <<'PY' &&
import json
import os
import shutil
import sys
from importlib import metadata

requirements, env, site = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
env_bin = os.path.join(env, "bin") + os.sep
driver_shebang, env_shebang = f"#!{os.path.join(sys.prefix, 'bin')}{os.sep}".encode(), f"#!{env_bin}".encode()


def installed_files(distribution):
    """(source, target) of every file of an installed distribution; None when they cannot be taken over."""
    direct_url = json.loads(distribution.read_text("direct_url.json") or "{}")
    if distribution.files is None or direct_url.get("dir_info", {}).get("editable"):
        return None
    root = distribution.locate_file("")
    pairs = []
    for path in distribution.files:
        source, target = os.path.normpath(os.path.join(root, path)), os.path.normpath(os.path.join(site, path))
        if not target.startswith(env + os.sep):
            return None
        if not os.path.isfile(source):
            if path.suffix == ".pyc":  # bytecode deleted since: the executors compile that module
                continue
            return None
        pairs.append((source, target))
    return pairs


def take_over(pairs, linked):
    for source, target in pairs:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(source, "rb") as file:
            head = file.read(len(driver_shebang)) if target.startswith(env_bin) else b""
            if head == driver_shebang:  # a script for the driver's interpreter: for this one, which venv-pack rewrites
                with open(target, "wb") as script:
                    script.write(env_shebang + file.read())
                shutil.copymode(source, target)
                continue
        inode = os.stat(source)
        if (inode.st_dev, inode.st_ino) not in linked:  # a file linked twice would go into the tar as a hard link
            linked.add((inode.st_dev, inode.st_ino))
            try:
                os.link(source, target)
                continue
            except OSError:
                pass
        shutil.copy2(source, target)


with open(requirements) as pins:
    lines = pins.read().split()
linked = set()
for line in lines:
    name, version = line.split("==")
    distribution = metadata.distribution(name)
    pairs = installed_files(distribution) if distribution.version == version else None
    if pairs is None:
        print(line)  # for pip to install
    else:
        take_over(pairs, linked)
for name in ("pip", "setuptools"):  # as a virtualenv has them; a missing pip comes from ensurepip
    try:
        pairs = installed_files(metadata.distribution(name))
    except metadata.PackageNotFoundError:
        pairs = None
    if pairs is not None:
        take_over(pairs, linked)
PY
        { "$build/env/bin/python" -m pip --version >/dev/null 2>&1 ||
            "$build/env/bin/python" -m ensurepip --default-pip >&2; } &&
        "$build/env/bin/python" -m pip install --disable-pip-version-check --quiet -r "$build/to-install.txt" \
            "venv-pack>=0.2" &&
        "$build/env/bin/venv-pack" --prefix "$build/env" --output "$build/env.tar.gz" --format tar.gz \
            --compress-level 1 --quiet ${EXECUTOR_PYTHON_PREFIX:+--python-prefix "$EXECUTOR_PYTHON_PREFIX"} &&
        mv -f "$build/env.tar.gz" "$EXECUTOR_ENV_ARCHIVE" ||
        { rm -rf "$build"; die "could not pack the executors' Python environment"; }
    printf '%s' "$wanted" >"$stamp"
    rm -rf "$build"
}

ensure_java
ensure_venv
build_libs_zip

master="${master:-${SPARK_MASTER:-local[*]}}"
properties="${user_properties:-$ROOT/conf/spark-defaults.conf}"
archives="$user_archives"
if [[ "$master" == local || "$master" == local\[* ]]; then
    # Driver and Python workers on this machine: both must be the venv's interpreter.
    export PYSPARK_PYTHON="$VENV/bin/python"
    export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
else
    # The driver runs here (client mode) with the venv; the executors get the packed environment unless their
    # Python is given. Spark unpacks an --archives entry ARCHIVE#environment into each executor's working directory.
    export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$VENV/bin/python}"
    if ! executor_python_given "$properties"; then
        executor_env="${PRODUCE_AUDIT_EXECUTOR_ENV:-}"
        if [[ -z "$executor_env" ]]; then
            ensure_executor_env
            executor_env="$EXECUTOR_ENV_ARCHIVE"
        fi
        archives="$executor_env#environment${archives:+,$archives}"
        export PYSPARK_PYTHON=./environment/bin/python
    fi
fi
# The master comes from this command line; the session must not replace it with spark.master of the config.
export SPARK_MASTER_FROM_SUBMIT=1

py_files="$LIBS_ZIP${user_py_files:+,$user_py_files}"
java_options=()
if [[ "$master" == local || "$master" == local\[* ]]; then  # a driver on this machine, where the archive is
    options="$(driver_java_options "$properties")"
    [[ -n "$options" ]] && java_options=(--conf "spark.driver.extraJavaOptions=$options")
    while IFS= read -r option; do
        [[ -n "$option" ]] && java_options+=("$option")
    done < <(local_fs_options "$properties")
fi
delta=()
while IFS= read -r option; do
    [[ -n "$option" ]] && delta+=("$option")
done < <(delta_options "$properties" "$@")
# spark-submit merges the Python driver's stderr into its stdout, so progress lines would mix into the report.
# Everything the job prints goes to stderr here; the report alone is written to a file and printed at the end.
report="$(mktemp)"
trap 'rm -f "$report"' EXIT
set +e
PRODUCE_AUDIT_REPORT_FILE="$report" "$VENV/bin/spark-submit" \
    --properties-file "$properties" \
    --master "$master" \
    ${java_options[@]+"${java_options[@]}"} \
    --py-files "$py_files" \
    ${archives:+--archives "$archives"} \
    ${submit_args[@]+"${submit_args[@]}"} \
    ${delta[@]+"${delta[@]}"} \
    "$ROOT/jobs/$job.py" "$@" 1>&2
code=$?
set -e
cat "$report"
exit "$code"
