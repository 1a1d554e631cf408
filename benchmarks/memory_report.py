"""`python -m benchmarks.memory_report`: what a proxy worker's memory is made of, step by step, in-process.

Imports what a worker imports, then installs the same `datasets.snapshot_payload(flags)` a few times the
way a worker's follower does, and prints VmRSS after each step and the Python objects still alive. With
`--from image` (the default) each install loads the image the instance's sync compiled (made in a child
process here, as the sync makes it in the main process); with `--from document` it parses and compiles
the document itself, as a worker does when it cannot use the image and as `--workers 1` does in its sync
(tracemalloc is off: it would change what it measures,
so live objects are counted by `sys.getallocatedblocks`). Compare with the RSS rows of `benchmarks.load`,
which add the response cache, the plans and Sanic's buffers under load.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile

import orjson


def rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _published(flags: int, folder: str) -> tuple[str, str]:
    """Files with the document and its image (flagproxy/image.py), made by a child process as the sync
    makes them in the main process: this process only reads bytes, as a worker does."""
    document, image = os.path.join(folder, "document.json"), os.path.join(folder, "image")
    subprocess.run(
        [sys.executable, "-m", "benchmarks.memory_report", "--write", str(flags), document, image], check=True
    )
    return document, image


def _write_published(flags: int, document: str, image: str) -> None:
    from benchmarks.datasets import snapshot_payload
    from flagproxy.instance.store import compile_image

    payload = snapshot_payload(flags)
    with open(document, "wb") as file:
        file.write(orjson.dumps(payload))
    with open(image, "wb") as file:
        file.write(compile_image(payload))


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory_report", description=__doc__)
    parser.add_argument("--flags", type=int, default=5000)
    parser.add_argument("--installs", type=int, default=4)
    parser.add_argument("--from", dest="source", choices=("image", "document"), default="image")
    parser.add_argument("--write", nargs=3, help=argparse.SUPPRESS)  # the child: flags, document, image
    args = parser.parse_args(argv)
    if args.write:
        _write_published(int(args.write[0]), args.write[1], args.write[2])
        return 0
    rows = [("interpreter", rss_mib(), sys.getallocatedblocks())]
    import flagproxy.proxy.app  # noqa: F401 - what a worker imports
    from flagproxy.instance.store import SnapshotStore, return_free_memory

    rows.append(("worker imports", rss_mib(), sys.getallocatedblocks()))
    if "aiohttp" in sys.modules:
        print("note: aiohttp is imported by the worker's modules", file=sys.stderr)
    folder = tempfile.mkdtemp(prefix="flagproxy-memory-report-")
    document_path, image_path = _published(args.flags, folder)
    store = SnapshotStore()
    for number in range(1, args.installs + 1):
        if args.source == "image":
            image = _read(image_path)
            store.install_image(image, "upstream")
            del image
        else:
            payload = orjson.loads(_read(document_path))
            store.install(payload, "upstream")
            del payload
        return_free_memory()  # as the follower does once the published bytes are dropped
        gc.collect()
        rows.append((f"after install {number} (from the {args.source})", rss_mib(), sys.getallocatedblocks()))
    shutil.rmtree(folder)
    print(f"| step ({args.flags} flags) | RSS MiB | Python blocks allocated |")
    print("|---|---:|---:|")
    for step, rss, blocks in rows:
        print(f"| {step} | {rss:.1f} | {blocks:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
