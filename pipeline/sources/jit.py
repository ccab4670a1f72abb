"""Whether compiled decoder kernels are cached on disk.

Kernels compile on first use in each Python process, a few seconds of CPU. numba keeps the machine code next
to the source (or in the user's cache folder) when the module is a real file, so later runs and Spark's
other Python workers load it instead; a module imported from the zip that spark-submit ships has no file
to key a cache on, and compiles every time.
"""

import os

CACHE_KERNELS = os.path.isfile(__file__)
