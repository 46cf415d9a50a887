//! Disks that fail as users' disks do, for the data directory of a test's
//! broker: a small tmpfs to fill ([`Tmpfs`], [`fill`]) and a small ext4
//! image that the kernel makes read-only on an error ([`Ext4`]), each
//! mounted on a directory of the test's own and unmounted on drop.
//! Mounting needs root (CI runs as root): elsewhere [`Tmpfs::mount_or_skip`]
//! and [`Ext4::mount_or_skip`] say so and the test does nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted on a directory, unmounted on drop (lazily, so that a
/// process still holding a file there cannot keep it mounted).
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
            .arg("tmpfs")
            .arg(dir)
            .status()
            .ok()?;
        st.success().then(|| Tmpfs(dir.to_owned()))
    }

    /// [`Tmpfs::mount`], or a line saying why the test does nothing.
    pub fn mount_or_skip(dir: &Path, size: &str) -> Option<Tmpfs> {
        let t = Tmpfs::mount(dir, size);
        if t.is_none() {
            eprintln!(
                "SKIPPED: cannot mount a tmpfs on {} (not root?); the full-disk test needs one",
                dir.display()
            );
        }
        t
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fill the file system holding `dir` with one file; returns its path.
pub fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("filler");
    let chunk = vec![0u8; 64 * 1024];
    loop {
        if let Err(e) = f.write_all(&chunk) {
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "filling: {e}");
            break;
        }
    }
    // Whatever is left is less than a chunk: fill it to the byte.
    while f.write_all(&[0u8; 512]).is_ok() {}
    while f.write_all(&[0u8]).is_ok() {}
    path
}

/// An ext4 file system in an image file (`mkfs.ext4`, mounted through a
/// loop device) with `errors=remount-ro`, what Debian's installer writes
/// in fstab: on an error the kernel makes it read-only under the running
/// broker, open files and all, as a failing disk does.
pub struct Ext4 {
    image: PathBuf,
    dir: PathBuf,
    mounted: bool,
}

impl Ext4 {
    /// A `mb` MB image at `image`, mounted on `dir`.
    pub fn mount(image: &Path, dir: &Path, mb: u32) -> Option<Ext4> {
        let made = Command::new("mkfs.ext4")
            .args(["-q", "-F", "-E", "root_owner"])
            .arg(image)
            .arg(format!("{mb}M"))
            .status()
            .ok()?;
        if !made.success() {
            return None;
        }
        let mut e = Ext4 {
            image: image.to_owned(),
            dir: dir.to_owned(),
            mounted: false,
        };
        e.mount_again().then_some(e)
    }

    /// [`Ext4::mount`], or a line saying why the test does nothing.
    pub fn mount_or_skip(image: &Path, dir: &Path, mb: u32) -> Option<Ext4> {
        let e = Ext4::mount(image, dir, mb);
        if e.is_none() {
            eprintln!(
                "SKIPPED: cannot make and mount an ext4 image on {} (not root, no loop device or no mkfs.ext4?); the read-only-disk test needs one",
                dir.display()
            );
        }
        e
    }

    /// Mount the image (again, read-write) on the directory.
    ///
    /// After a lazy unmount the kernel may still hold the old file
    /// system (a killed broker's files closing) on the old loop device,
    /// and `mount -o loop` reuses a loop device already bound to the
    /// image: the "new" mount was then the old, read-only file system
    /// (seen in loaded fresh-clone runs: the restarted broker could not
    /// write). So first wait (bounded) until no loop device holds the
    /// image, and repair it (`e2fsck -fy`: the error the failing disk
    /// recorded), as a user would before mounting it again.
    pub fn mount_again(&mut self) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            let held = Command::new("losetup")
                .arg("-j")
                .arg(&self.image)
                .output()
                .is_ok_and(|o| !o.stdout.is_empty());
            if !held {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = Command::new("e2fsck")
            .args(["-f", "-y", "-q"])
            .arg(&self.image)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        let ok = Command::new("mount")
            .args(["-t", "ext4", "-o", "loop,errors=remount-ro"])
            .arg(&self.image)
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            let _ = std::fs::set_permissions(
                &self.dir,
                std::os::unix::fs::PermissionsExt::from_mode(0o700),
            );
        }
        self.mounted = ok;
        ok
    }

    /// Unmount (lazily: a killed process's files may still be closing).
    pub fn unmount(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
            self.mounted = false;
        }
    }

    /// The loop device under the directory (`/dev/loopN`).
    fn device(&self) -> Option<String> {
        let out = Command::new("findmnt")
            .args(["-n", "-o", "SOURCE", "--mountpoint"])
            .arg(&self.dir)
            .output()
            .ok()?;
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        (!dev.is_empty()).then_some(dev)
    }

    /// An error in the file system, as the kernel meets one on a failing
    /// disk (`/sys/fs/ext4/DEV/trigger_fs_error`): the kernel makes it
    /// read-only at once. What was written before is synced first (as
    /// on a disk that failed long after it was written): what the page
    /// cache held unwritten is lost with the error. Whether it is
    /// read-only now.
    pub fn fail(&self) -> bool {
        let Some(dev) = self.device() else {
            return false;
        };
        let _ = Command::new("sync").arg("-f").arg(&self.dir).status();
        let name = dev.trim_start_matches("/dev/");
        let knob = format!("/sys/fs/ext4/{name}/trigger_fs_error");
        if std::fs::write(&knob, "contextd test: the disk fails\n").is_err() {
            return false;
        }
        self.read_only()
    }

    /// Whether the mount is read-only (`ro`, or `emergency_ro` as newer
    /// kernels say after an error).
    pub fn read_only(&self) -> bool {
        Command::new("findmnt")
            .args(["-n", "-o", "OPTIONS", "--mountpoint"])
            .arg(&self.dir)
            .output()
            .is_ok_and(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split(',')
                    .any(|opt| matches!(opt.trim(), "ro" | "emergency_ro"))
            })
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        self.unmount();
    }
}
