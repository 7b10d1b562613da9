"""A scratch filesystem on a loop device holding one file of random bytes, for
the kernel micro-benchmarks beside it (sendfile-lru.py, bytes-ahead.py), and
the small helpers they share.

The loop device does direct I/O to its image, so the image's own pages stay
out of the page cache and every page of the file is cached once, under the
filesystem. Its read_ahead_kb is the kernel readahead the file gets.
"""
import os
import shutil
import subprocess
import sys
import tempfile


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def evict(path):
    """Drops the file's pages from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def drain(sock):
    """Reads a socket until its peer closes it (a thread's body)."""
    while sock.recv(1 << 20):
        pass


class LoopFs:
    """`with LoopFs(name, fs, size_mb) as lf:` makes an image under
    /var/tmp/NAME-*, a filesystem on a loop device over it, mounted, holding
    `lf.path` (size_mb MiB of random bytes, synced); on exit everything is
    unmounted, detached and removed. `lf.read_ahead_kb = N` sets the device's
    readahead; `lf.sectors_read()` is its read counter in bytes."""

    def __init__(self, name, fs, size_mb):
        self.name, self.fs, self.size_mb = name, fs, size_mb
        self.loop = None
        self.mounted = False

    def __enter__(self):
        mkfs = shutil.which(f"mkfs.{self.fs}")
        if not mkfs:
            raise SystemExit(f"{self.name}: mkfs.{self.fs} is not installed")
        self.work = tempfile.mkdtemp(prefix=f"{self.name}-", dir="/var/tmp")
        try:
            image, self.mnt = os.path.join(self.work, "image"), os.path.join(self.work, "mnt")
            with open(image, "wb") as f:
                f.truncate((self.size_mb + 256) << 20)
            run([mkfs, "-q", "-f" if self.fs == "xfs" else "-F", image])
            self.loop = run(["losetup", "--find", "--show", "--direct-io=on", image])
            os.makedirs(self.mnt)
            run(["mount", self.loop, self.mnt])
            self.mounted = True
            self.fstype = next((line.split()[2] for line in open("/proc/mounts") if line.split()[1] == self.mnt), "?")
            if self.fstype != self.fs:
                raise RuntimeError(f"{self.mnt} is mounted as {self.fstype}, not {self.fs}")
            self.path = os.path.join(self.mnt, "video")
            with open(self.path, "wb") as f:
                for _ in range(self.size_mb):
                    f.write(os.urandom(1 << 20))
                os.fsync(f.fileno())
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    @property
    def _queue(self):
        return f"/sys/block/{os.path.basename(self.loop)}"

    @property
    def read_ahead_kb(self):
        return int(open(f"{self._queue}/queue/read_ahead_kb").read())

    @read_ahead_kb.setter
    def read_ahead_kb(self, kb):
        with open(f"{self._queue}/queue/read_ahead_kb", "w") as f:
            f.write(str(kb))

    def bytes_read(self):
        """Bytes the loop device has read since it was attached (/sys/block/*/stat)."""
        return int(open(f"{self._queue}/stat").read().split()[2]) * 512

    def __exit__(self, *exc):
        if self.mounted:
            done = subprocess.run(["umount", self.mnt], capture_output=True, text=True)
            if done.returncode != 0:
                # Left as it is, named, rather than its image removed beneath it.
                print(f"{self.name}: could not unmount {self.mnt} ({done.stderr.strip()}); left mounted on {self.loop}", file=sys.stderr)
                return False
            self.mounted = False
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], check=False)
            self.loop = None
        shutil.rmtree(self.work, ignore_errors=True)
        return False
