// How a stream buffer's fresh pages are best backed, in two questions
// (docs/benchmarks.md, "Full mode from nginx, thread by thread"):
//
//   gcc -O2 -pthread bench/page_backing.c -o /tmp/page_backing
//   /tmp/page_backing lock MODE    # MODE 0: one MADV_POPULATE_WRITE for 256 MiB,
//                                  # 1: calls of 4 MiB, 2: a write to each page
//   /tmp/page_backing recv MODE    # MODE 0: each 64 MiB buffer backed whole before
//                                  # its bytes, 1: 4 MiB ahead of them, 2: not at all
//
// lock: while one thread backs 256 MiB of small pages, another maps and
// unmaps 1 MiB every 0.5 ms; prints the backing's rate and the longest mmap
// wait (the populate holds the process's mmap lock for reading; page faults
// take per-VMA locks, Linux 6.4 and later).
// recv: 512 MiB over a loopback TCP connection, received 256 KiB at a time
// into 8 fresh buffers of 64 MiB; prints the receiving thread's CPU-seconds
// per GB, backing included.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static double ThreadCpu(void) {
  struct rusage r;
  getrusage(RUSAGE_THREAD, &r);
  return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}

static char* FreshSmallPages(size_t n) {
  char* p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  madvise(p, n, MADV_NOHUGEPAGE);
  return p;
}

// Backs p[from, to) the way `mode` says.
static void Back(char* p, size_t from, size_t to, int mode) {
  const size_t step = mode == 1 ? (size_t)4 << 20 : to - from;
  if (mode == 2) {
    for (size_t o = from; o < to; o += 4096) ((volatile char*)p)[o] = 0;
    return;
  }
  for (size_t o = from; o < to; o += step) madvise(p + o, step < to - o ? step : to - o, MADV_POPULATE_WRITE);
}

static int lock_mode;
static volatile int lock_done;

static void* Backer(void* arg) {
  (void)arg;
  const size_t n = (size_t)256 << 20;
  char* p = FreshSmallPages(n);
  const double t = Now();
  Back(p, 0, n, lock_mode);
  printf("mode %d: 256 MiB backed at %.2f GB/s; ", lock_mode, n / 1e9 / (Now() - t));
  lock_done = 1;
  return NULL;
}

static void Lock(int mode) {
  lock_mode = mode;
  pthread_t th;
  pthread_create(&th, NULL, Backer, NULL);
  usleep(1000);
  double worst = 0;
  while (!lock_done) {
    const double t = Now();
    void* q = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    const double d = Now() - t;
    if (d > worst) worst = d;
    munmap(q, 1 << 20);
    usleep(500);
  }
  pthread_join(th, NULL);
  printf("the longest mmap meanwhile %.2f ms\n", worst * 1e3);
}

#define TOTAL ((size_t)512 << 20)
#define BUFFER ((size_t)64 << 20)
static int port;

static void* Sender(void* arg) {
  (void)arg;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  while (connect(s, (struct sockaddr*)&a, sizeof a) != 0) usleep(1000);
  char* b = malloc(1 << 20);
  memset(b, 1, 1 << 20);
  for (size_t sent = 0; sent < TOTAL;) {
    const ssize_t k = write(s, b, TOTAL - sent < (1 << 20) ? TOTAL - sent : (1 << 20));
    if (k <= 0) break;
    sent += (size_t)k;
  }
  close(s);
  free(b);
  return NULL;
}

static void Recv(int mode) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(ls, (struct sockaddr*)&a, sizeof a) != 0 || getsockname(ls, (struct sockaddr*)&a, &len) != 0 ||
      listen(ls, 1) != 0) {
    perror("listen");
    exit(1);
  }
  port = ntohs(a.sin_port);
  pthread_t th;
  pthread_create(&th, NULL, Sender, NULL);
  const int s = accept(ls, NULL, NULL);
  const double c0 = ThreadCpu(), t0 = Now();
  const size_t ahead = (size_t)4 << 20;
  for (size_t done = 0; done < TOTAL; done += BUFFER) {
    char* p = FreshSmallPages(BUFFER);
    size_t backed = 0, got = 0;
    if (mode == 0) Back(p, 0, backed = BUFFER, 0);
    while (got < BUFFER) {
      if (mode == 1)
        for (; backed < BUFFER && backed < got + ahead; backed += ahead) Back(p, backed, backed + ahead, 0);
      const ssize_t k = recv(s, p + got, BUFFER - got < (256 << 10) ? BUFFER - got : (256 << 10), 0);
      if (k <= 0) break;
      got += (size_t)k;
    }
  }
  const double cpu = ThreadCpu() - c0, dt = Now() - t0;
  pthread_join(th, NULL);
  printf("mode %d: %.3f CPU-s/GB received, backing included (%.2f GB/s)\n", mode, cpu / (TOTAL / 1e9),
         TOTAL / 1e9 / dt);
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "lock") != 0 && strcmp(argv[1], "recv") != 0)) {
    fprintf(stderr, "usage: %s lock|recv MODE (0, 1 or 2)\n", argv[0]);
    return 2;
  }
  const int mode = atoi(argv[2]);
  if (strcmp(argv[1], "lock") == 0) Lock(mode);
  else Recv(mode);
  return 0;
}
