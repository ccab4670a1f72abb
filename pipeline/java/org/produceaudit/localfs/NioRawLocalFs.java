package org.produceaudit.localfs;

import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * The FileContext view of {@link NioRawLocalFileSystem}, as Hadoop's RawLocalFs is of RawLocalFileSystem. Delta's
 * log store renames through FileContext, which asks for the link status of both paths of every rename.
 */
public class NioRawLocalFs extends DelegateToFileSystem {
  public NioRawLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(uri, new NioRawLocalFileSystem(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
  }

  @Override
  public int getUriDefaultPort() {
    return -1;
  }

  @Override
  @SuppressWarnings("deprecation")  // as RawLocalFs: the local defaults, not the configuration's
  public FsServerDefaults getServerDefaults() throws IOException {
    return LocalConfigKeys.getServerDefaults();
  }

  @Override
  public boolean isValidName(String src) {
    return true;  // as RawLocalFs: the local file system judges names itself
  }

  @Override
  public boolean supportsSymlinks() {
    return true;
  }

  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    FileStatus status = fsImpl.getFileLinkStatus(f);
    if (status.isSymlink()) {  // FileContext qualifies the target itself
      status.setSymlink(new Path(Files.readSymbolicLink(new File(f.toUri().getPath()).toPath()).toString()));
    }
    return status;
  }
}
