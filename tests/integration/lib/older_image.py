"""older_image.py SRC DST: writes DST, the drive image SRC (a .vbimg) as the
builder version before SRC's made it: the header's key says one version
less, everything else is SRC's. For tests of mounting an image an older
vidbench built (vidbench disk mount --image; vidbench run --resume)."""
import gzip
import json
import struct
import sys

data = gzip.open(sys.argv[1]).read()
n = struct.unpack("<I", data[8:12])[0]
header = json.loads(data[12:12 + n])
header["key"]["builder_version"] -= 1
h = json.dumps(header).encode()
with gzip.open(sys.argv[2], "wb") as out:
    out.write(data[:8] + struct.pack("<I", len(h)) + h + data[12 + n:])
