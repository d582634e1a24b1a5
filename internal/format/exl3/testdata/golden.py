# golden.py writes golden.txt: an independent transcription, in Python, of
# how exllamav3 (v1.4.1: exllamav3_ext/quant/codebook.cuh, exl3_dq.cuh,
# modules/quant/exl3_lib/quantize.py's tensor-core order) decodes a trellis
# tile, written for these tests from the reading of that source, not
# copied from it. Python's struct 'e' rounds to fp16 to nearest-even; every
# fp16 sum here is exact in a double, so it rounds once, as an fp16 add.
#
#   python3 golden.py > golden.txt
import struct, hashlib

def f16(b): return struct.unpack('<e', struct.pack('<H', b))[0]
def bits(x): return struct.unpack('<H', struct.pack('<e', x))[0]

def inst(s, mul, add):
    x = (s*mul + add) & 0xFFFFFFFF
    x = (x & 0x8FFF8FFF) ^ 0x3B603B60
    return bits(f16(x & 0xFFFF) + f16(x >> 16))

def mul1(s):
    x = (s*0x83DCD12D) & 0xFFFFFFFF
    S = sum((x >> (8*i)) & 0xFF for i in range(4))
    return bits((1024+S)*f16(0x1EEE) + f16(0xC931))

cbs = {"3inst": lambda s: inst(s, 89226354, 64248484), "mcg": lambda s: inst(s, 0xCBAC1FED, 0), "mul1": mul1}
print("# codebook sha256 of the 65536 states' fp16 bits, little-endian uint16")
for name, fn in cbs.items():
    h = hashlib.sha256(b''.join(struct.pack('<H', fn(s)) for s in range(65536))).hexdigest()
    print("codebook", name, h)
print("# tile K codebook sha256 of the 16x16 row-major fp16 bits of the tile whose int16 words are w[j] = ((j+1)*40503 + K*7919) & 0xFFFF")
offs = [(0, 0), (1, 0), (8, 0), (9, 0), (0, 8), (1, 8), (8, 8), (9, 8)]
for K in range(1, 9):
    w = [((j+1)*40503 + K*7919) & 0xFFFF for j in range(16*K)]
    u = [w[2*i] | (w[2*i+1] << 16) for i in range(8*K)]
    n = 256*K
    def bit(b):
        b %= n
        return (u[b >> 5] >> (31 - (b & 31))) & 1
    for name, fn in cbs.items():
        W = [0]*256
        for p in range(256):
            s = 0
            for b in range((p+1)*K - 16, (p+1)*K):
                s = (s << 1) | bit(b)
            t, e = p//8, p % 8
            r = 2*(t % 4) + offs[e][0]
            c = t//4 + offs[e][1]
            W[r*16 + c] = fn(s)
        print("tile", K, name, hashlib.sha256(b''.join(struct.pack('<H', x) for x in W)).hexdigest())
