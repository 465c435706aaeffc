//! Files swapped the way editors and kubelet do it, and ConfigMap-style
//! directories.

use std::fs;
use std::path::{Path, PathBuf};

/// Replaces `path` atomically: writes a sibling temporary file, then renames
/// it over (what editors, `kubectl cp` and kubelet's atomic writer end with).
pub fn replace_file(path: &Path, content: &str) {
    let name = path.file_name().expect("a file name").to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    fs::write(&tmp, content).expect("write the temporary file");
    fs::rename(&tmp, path).expect("rename over the file");
}

/// A directory laid out the way kubelet mounts a ConfigMap or Secret:
///
/// ```text
/// dir/..2026_11_29_v1/<file>       the data, one directory per version
/// dir/..data -> ..2026_11_29_v1    swapped atomically on every update
/// dir/<file> -> ..data/<file>      stable names for the consumer
/// ```
pub struct ConfigMapDir {
    dir: PathBuf,
    version: u32,
}

impl ConfigMapDir {
    /// Lays out version 1 with `files` (name, content).
    pub fn new(dir: &Path, files: &[(&str, &str)]) -> Self {
        fs::create_dir_all(dir).expect("create the volume directory");
        let mut me = ConfigMapDir {
            dir: dir.to_path_buf(),
            version: 0,
        };
        me.swap(files);
        for (name, _) in files {
            std::os::unix::fs::symlink(Path::new("..data").join(name), dir.join(name))
                .expect("symlink the file to ..data");
        }
        me
    }

    /// The stable path of `name` (a symlink through `..data`).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes a new version directory and swaps `..data` to it with one
    /// rename, then removes the old version, as kubelet's atomic writer does.
    pub fn swap(&mut self, files: &[(&str, &str)]) {
        let old = self.version;
        self.version += 1;
        let version = format!("..2026_11_29_v{}", self.version);
        let data = self.dir.join(&version);
        fs::create_dir(&data).expect("create the version directory");
        for (name, content) in files {
            fs::write(data.join(name), content).expect("write a data file");
        }
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&version, &tmp).expect("symlink ..data_tmp");
        fs::rename(&tmp, self.dir.join("..data")).expect("rename ..data_tmp over ..data");
        if old > 0 {
            fs::remove_dir_all(self.dir.join(format!("..2026_11_29_v{old}")))
                .expect("remove the old version");
        }
    }
}
