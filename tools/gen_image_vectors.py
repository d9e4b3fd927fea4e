#!/usr/bin/env python3
"""Test pictures for the image decoder (src/vision/image_decode.h,
tests/test_image_decode.cpp), encoded by Pillow, with Pillow's own decode of
each stored beside it as the independent reference (Pillow from PyPI is a
test-data-time tool only; the tests never run Python).

  pip install pillow numpy
  python3 tools/gen_image_vectors.py        # -> tests/data/images/

Writes, for each picture NAME.{png,jpg,webp}, NAME.EXT.rgb: the RGB bytes the decoder
must give (height x width x 3), and MANIFEST.txt: one line per picture
"file width height tolerance rule". The rule says how the reference was
made; where it is not Pillow's convert("RGB") it is the rule llama.cpp's
loader (stb_image asked for three channels) follows:

  pillow      Image.open(f).convert("RGB")
  high-byte   16-bit samples: v >> 8 (Pillow's convert clips I;16 instead)
  no-rotate   EXIF orientation ignored: the stored pixels, not the rotated
              picture (llama.cpp ignores the tag; Pillow too unless
              ImageOps.exif_transpose is called)

Tolerance: 0 for PNG (lossless); JPEG 1: Pillow's wheel carries
libjpeg-turbo 3.x and the build links Debian's 2.1, both with libjpeg's
defaults (the accurate integer IDCT and fancy upsampling), whose C and SIMD
paths are bit-exact, so the decodes should agree exactly; one unit is
allowed for a SIMD path (or CMYK conversion, where Pillow's and stb_image's
integer roundings of C*K/255 differ) that rounds differently.

Checked once against llama.cpp's own loader (stb_image 2.30 from the
llama-cpp-python 0.3.36 sdist, stbi_load(..., 3)) on these files: every PNG
reference equal byte for byte (so the rules above are stb_image's); the
JPEGs within 2 units (mean 0.005-0.09 per byte): stb_image's IDCT and
chroma upsampling are its own, not libjpeg's.

Hostile files, refused by size before any pixel is allocated:
  huge.png      a valid IHDR declaring 100000 x 100000 (no pixel data)
  bomb.png      a complete, valid 1-bit 16384 x 8192 picture (134 Mpx,
                402 MiB as RGB) in a few KB
  huge.jpg      rgb.jpg with its frame header declaring 65000 x 65000
  huge.webp     a lossless header declaring 16384 x 16384 (no pixel data)
  bomb.webp     a complete, valid lossless 16383 x 8192 picture in bytes
Refused as unsupported: animated.webp (two frames).
The pictures are synthetic (gradients, a disc, noise): no third-party content.
"""
import io
import os
import struct
import zlib

import numpy as np
from PIL import Image

WEBP_LOSSY_TOL = 0
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "images")


def picture(w, h, seed):
    """An RGB test picture: gradients, a disc and noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255 // max(w - 1, 1)).astype(np.uint8)
    g = (y * 255 // max(h - 1, 1)).astype(np.uint8)
    b = np.where((x - w / 2) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 3) ** 2, 230, 20).astype(np.uint8)
    img = np.stack([r, g, b], axis=-1)
    noise = rng.integers(-12, 13, size=img.shape)
    return np.clip(img.astype(int) + noise, 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def raw_png(w, h, depth, color, rows):
    """A PNG written by hand (Pillow cannot write 16-bit RGB): rows are bytes, filter 0."""
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 0)
    data = b"".join(b"\x00" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(data, 9)) +
            png_chunk(b"IEND", b""))


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = []

    def save(name, blob, expected, tol, rule):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(blob)
        h, w, _ = expected.shape
        with open(os.path.join(OUT, name + ".rgb"), "wb") as f:
            f.write(np.ascontiguousarray(expected, dtype=np.uint8).tobytes())
        manifest.append(f"{name} {w} {h} {tol} {rule}")

    def encode(img, fmt, **kw):
        buf = io.BytesIO()
        img.save(buf, fmt, **kw)
        return buf.getvalue()

    def pillow_rgb(blob):
        return np.asarray(Image.open(io.BytesIO(blob)).convert("RGB"))

    base = picture(17, 11, 1)
    rgb = Image.fromarray(base, "RGB")
    # PNG: every colour type and the depths llama.cpp's loader meets
    for name, img, kw in [
        ("rgb.png", rgb, {}),
        ("gray.png", rgb.convert("L"), {}),
        ("gray1.png", rgb.convert("1"), {}),
        ("palette.png", rgb.quantize(colors=13), {}),
        ("palette_trns.png", rgb.quantize(colors=13), {"transparency": 3}),
        ("rgba.png", Image.fromarray(np.dstack([base, picture(17, 11, 2)[..., 0]]), "RGBA"), {}),
        ("la.png", Image.fromarray(np.dstack([base[..., 0], base[..., 1]]), "LA"), {}),
    ]:
        blob = encode(img, "PNG", **kw)
        save(name, blob, pillow_rgb(blob), 0, "pillow")
    # 16-bit: gray through Pillow (I;16), RGB by hand; the reference keeps the high byte
    g16 = (picture(9, 6, 3)[..., 0].astype(np.uint16) * 257 + np.arange(54, dtype=np.uint16).reshape(6, 9))
    blob = encode(Image.fromarray(g16), "PNG")
    hi = (np.asarray(Image.open(io.BytesIO(blob))).astype(np.uint16) >> 8).astype(np.uint8)
    save("gray16.png", blob, np.dstack([hi, hi, hi]), 0, "high-byte")
    c16 = picture(9, 6, 4).astype(np.uint16) * 257 + 77
    blob = raw_png(9, 6, 16, 2, [c16[y].astype(">u2").tobytes() for y in range(6)])
    save("rgb16.png", blob, (c16 >> 8).astype(np.uint8), 0, "high-byte")

    # JPEG: chroma subsampling 4:2:0 and 4:4:4, gray, progressive, CMYK, EXIF rotation
    big = Image.fromarray(picture(37, 23, 5), "RGB")
    for name, img, kw in [
        ("rgb.jpg", big, {"quality": 90}),
        ("rgb444.jpg", big, {"quality": 90, "subsampling": 0}),
        ("gray.jpg", big.convert("L"), {"quality": 90}),
        ("progressive.jpg", big, {"quality": 85, "progressive": True}),
        ("cmyk.jpg", big.convert("CMYK"), {"quality": 95}),
    ]:
        blob = encode(img, "JPEG", **kw)
        save(name, blob, pillow_rgb(blob), 1, "pillow")
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 CW to display
    blob = encode(big, "JPEG", quality=90, exif=exif.tobytes())
    save("exif_rotated.jpg", blob, pillow_rgb(blob), 1, "no-rotate")

    # WebP: lossy and lossless, with and without alpha. stb_image has no
    # WebP, so llama.cpp decodes none; Pillow's decode (its wheel's libwebp)
    # is the reference. Lossless: exact. Lossy: libwebp's YUV -> RGB with
    # its default (fancy) upsampling in both; WEBP_LOSSY_TOL allows for the
    # wheel's newer libwebp against Debian's 1.2.
    wbase = picture(37, 23, 6)
    walpha = Image.fromarray(np.dstack([wbase, picture(37, 23, 7)[..., 0]]), "RGBA")
    for name, img, kw, tol in [
        ("lossy.webp", Image.fromarray(wbase, "RGB"), {"quality": 80}, WEBP_LOSSY_TOL),
        ("lossless.webp", Image.fromarray(wbase, "RGB"), {"lossless": True}, 0),
        ("alpha_lossy.webp", walpha, {"quality": 80}, WEBP_LOSSY_TOL),
        ("alpha_lossless.webp", walpha, {"lossless": True, "exact": True}, 0),
        ("gray_lossy.webp", Image.fromarray(wbase, "RGB").convert("L"), {"quality": 90}, WEBP_LOSSY_TOL),
    ]:
        blob = encode(img, "WEBP", **kw)
        save(name, blob, pillow_rgb(blob), tol, "pillow")
    # an animation (two frames): refused, not decoded as its first frame
    frames = [Image.fromarray(wbase, "RGB"), Image.fromarray(255 - wbase, "RGB")]
    with open(os.path.join(OUT, "animated.webp"), "wb") as f:
        f.write(encode(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100, lossless=True))

    # hostile
    with open(os.path.join(OUT, "huge.webp"), "wb") as f:
        # a lossless (VP8L) header declaring 16384 x 16384 (WebP's largest,
        # 268 Mpx) and no pixel data
        bits = (16384 - 1) | ((16384 - 1) << 14)  # width-1, height-1; no alpha, version 0
        vp8l = b"\x2f" + struct.pack("<I", bits) + bytes(11)
        f.write(b"RIFF" + struct.pack("<I", 4 + 8 + len(vp8l)) + b"WEBP" + b"VP8L" + struct.pack("<I", len(vp8l)) + vp8l)
    with open(os.path.join(OUT, "bomb.webp"), "wb") as f:
        # a complete, valid lossless 16383 x 8192 picture of one colour
        # (134 Mpx, 402 MiB as RGB) in well under a KB
        f.write(encode(Image.new("RGB", (16383, 8192), (40, 90, 200)), "WEBP", lossless=True, method=0, quality=0))
    with open(os.path.join(OUT, "huge.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)) +
                png_chunk(b"IEND", b""))
    with open(os.path.join(OUT, "bomb.png"), "wb") as f:
        row = bytes(16384 // 8)
        f.write(raw_png(16384, 8192, 1, 0, [row] * 8192))
    jpg = bytearray(encode(big, "JPEG", quality=90))
    sof = jpg.index(b"\xff\xc0")
    jpg[sof + 5:sof + 9] = struct.pack(">HH", 65000, 65000)
    with open(os.path.join(OUT, "huge.jpg"), "wb") as f:
        f.write(bytes(jpg))

    with open(os.path.join(OUT, "MANIFEST.txt"), "w") as f:
        f.write("# file width height tolerance rule (tools/gen_image_vectors.py)\n")
        f.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
