"""How fast this machine writes into fresh page-cache pages (new files on
/dev/shm, deleted and created again, as a cache that evicts does) against
the same writes into memory buffers that are reused (memfds overwritten in
place, as the streaming cache's full mode does once its cache is full).

    python bench/page_writes.py

32 writes of 32 MiB each way, in 512 KiB pwrites, three rounds.
"""
import os
import time

SIZE = 32 << 20
CHUNK = os.urandom(512 * 1024)


def fill(fd):
    for off in range(0, SIZE, len(CHUNK)):
        os.pwrite(fd, CHUNK, off)


def main():
    for _ in range(3):
        t0 = time.perf_counter()
        for i in range(32):
            path = f"/dev/shm/stoker-page-writes-{i % 16}"
            if os.path.exists(path):
                os.remove(path)
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
            fill(fd)
            os.close(fd)
        fresh = 32 * SIZE / (time.perf_counter() - t0)
        fds = [os.memfd_create(f"ring{i}") for i in range(4)]
        for fd in fds:
            os.ftruncate(fd, SIZE)
            fill(fd)
        t0 = time.perf_counter()
        for i in range(32):
            fill(fds[i % 4])
        reused = 32 * SIZE / (time.perf_counter() - t0)
        for fd in fds:
            os.close(fd)
        print(f"fresh page-cache pages {fresh / 1e9:.2f} GB/s, reused memory {reused / 1e9:.2f} GB/s")
    for i in range(16):
        path = f"/dev/shm/stoker-page-writes-{i}"
        if os.path.exists(path):
            os.remove(path)


if __name__ == "__main__":
    main()
