#!/usr/bin/env python3
"""Draw packaging/mcpb/icon.png, the bundle's icon (512x512, the size
Claude Desktop recommends): a window on a blue tile, with an amber dot, the
context an app may see once the user allowed it. Standard library only;
run it again after changing the drawing:

    python3 packaging/mcpb/icon.py packaging/mcpb/icon.png
"""
import math
import struct
import sys
import zlib

SIZE = 512


def rounded_rect(x, y, x0, y0, x1, y1, r):
    """Signed distance from (x, y) to a rounded rectangle (negative inside)."""
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    hx, hy = (x1 - x0) / 2 - r, (y1 - y0) / 2 - r
    dx, dy = abs(x - cx) - hx, abs(y - cy) - hy
    outside = math.hypot(max(dx, 0.0), max(dy, 0.0))
    return outside + min(max(dx, dy), 0.0) - r


def cover(d):
    """Coverage of a pixel whose centre is at signed distance d."""
    return min(max(0.5 - d, 0.0), 1.0)


def mix(a, b, t):
    return tuple(a[i] + (b[i] - a[i]) * t for i in range(len(a)))


def pixel(x, y):
    top, bottom = (70, 92, 214), (30, 40, 120)
    bg = mix(top, bottom, y / SIZE)
    alpha = cover(rounded_rect(x, y, 0, 0, SIZE, SIZE, 104))
    rgb = bg
    # The window: a frame 20 px wide and a filled title bar.
    frame = rounded_rect(x, y, 104, 132, 408, 380, 30)
    ring = max(frame, -(frame + 20))
    bar = max(rounded_rect(x, y, 104, 132, 408, 380, 30), y - 190)
    white = max(cover(ring), cover(bar))
    rgb = mix(rgb, (255, 255, 255), white)
    # The amber dot in the window.
    dot = math.hypot(x - 256, y - 285) - 46
    rgb = mix(rgb, (255, 196, 61), cover(dot))
    return tuple(round(c) for c in rgb) + (round(255 * alpha),)


def png(width, height, rows):
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\0" + bytes(row) for row in rows)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def main():
    rows = []
    for j in range(SIZE):
        row = []
        for i in range(SIZE):
            row.extend(pixel(i + 0.5, j + 0.5))
        rows.append(row)
    with open(sys.argv[1], "wb") as f:
        f.write(png(SIZE, SIZE, rows))


if __name__ == "__main__":
    main()
