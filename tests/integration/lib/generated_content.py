"""The emulated disk's generated file content, computed independently of the
Rust generator (crates/vidbench-library/src/content.rs), and a check of every
file of a library read through a mount: `python3 generated_content.py MNT LIB.json`.

Word w of file id is splitmix64(id << 40 ^ w ^ SALT) little-endian; the tests
compare what the kernel returns (FUSE or block mode) with this, at page and
request boundaries, around EOF and at random offsets."""
import json
import os
import random
import sys

M = (1 << 64) - 1
SALT = 0x6c63705f76696462


def splitmix(z):
    z = (z + 0x9e3779b97f4a7c15) & M
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M
    return z ^ (z >> 31)


def expected(fid, off, n):
    """The n bytes of file fid at offset off."""
    first, last = off // 8, (off + n + 7) // 8
    b = b"".join(splitmix(((fid << 40) ^ w ^ SALT) & M).to_bytes(8, "little") for w in range(first, last))
    return b[off % 8: off % 8 + n]


def check_files(mnt, lib, seed=3):
    """Reads every file of lib under mnt with pread at fixed and random
    offsets, asserting sizes and bytes; returns the number of reads checked."""
    rng = random.Random(seed)
    checked = 0
    for f in lib["files"]:
        path, size, fid = os.path.join(mnt, f["path"]), f["size"], f["id"]
        assert os.stat(path).st_size == size, (path, os.stat(path).st_size, size)
        fd = os.open(path, os.O_RDONLY)
        cases = [(0, 100), (4090, 20), (131072 - 3, 10), (1048576 - 5, 4096 + 10), (size - 10, 10), (size - 3, 100), (size, 10), (size + 4096, 10)]
        cases += [(rng.randrange(size), rng.randrange(1, 20000)) for _ in range(30)]
        for off, n in cases:
            got = os.pread(fd, n, off)
            want = expected(fid, off, max(0, min(n, size - off))) if off < size else b""
            assert got == want, f"{path} offset {off} length {n}: {len(got)} bytes differ from the generator"
            checked += 1
        os.close(fd)
    return checked


if __name__ == "__main__":
    mnt, lib = sys.argv[1], json.load(open(sys.argv[2]))
    print(f"generator: {check_files(mnt, lib)} reads verified")
