// alloc_count.so: counts heap allocations of a process, for bench/run.sh (LD_PRELOAD only; never
// linked into anything).
//
//   LD_PRELOAD=build/bench/liballoc-count.so ALLOC_COUNT_FILE=/tmp/x kuberay-tpu-webhook ...
//
// Every malloc, calloc, realloc (to a non-zero size), aligned_alloc, posix_memalign, memalign,
// valloc and every operator new / new[] (all their variants) adds one to "allocations" (frees
// are not counted: operator delete is left alone). Each call forwards to the next definition
// (dlsym(RTLD_NEXT)): jemalloc when the server links it, else glibc. jemalloc defines operator new
// itself without calling malloc, so new is wrapped too; when new is libstdc++'s (which calls
// malloc), a thread-local flag keeps the inner malloc from being counted twice.
//
// A thread started by the constructor writes the counters to the file named by ALLOC_COUNT_FILE
// every 100 ms (written to FILE.tmp, then renamed over FILE, so a reader never sees half a file):
//   allocations N
// Without ALLOC_COUNT_FILE the library only counts.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void* (*malloc_fn)(size_t);
typedef void* (*calloc_fn)(size_t, size_t);
typedef void* (*realloc_fn)(void*, size_t);
typedef void (*free_fn)(void*);
typedef void* (*aligned_fn)(size_t, size_t);  // aligned_alloc and memalign: (alignment, size)
typedef int (*posix_memalign_fn)(void**, size_t, size_t);
typedef void* (*new_fn)(size_t);
typedef void* (*new_nothrow_fn)(size_t, const void*);
typedef void* (*new_aligned_fn)(size_t, size_t);
typedef void* (*new_aligned_nothrow_fn)(size_t, size_t, const void*);

static malloc_fn next_malloc;
static calloc_fn next_calloc;
static realloc_fn next_realloc;
static free_fn next_free;
static aligned_fn next_aligned_alloc;
static aligned_fn next_memalign;
static posix_memalign_fn next_posix_memalign;
static malloc_fn next_valloc;
static new_fn next_new, next_new_array;
static new_nothrow_fn next_new_nothrow, next_new_array_nothrow;
static new_aligned_fn next_new_aligned, next_new_array_aligned;
static new_aligned_nothrow_fn next_new_aligned_nothrow, next_new_array_aligned_nothrow;

static atomic_ulong allocations;
static __thread int inside_new __attribute__((tls_model("initial-exec")));

// dlsym may allocate (calloc for its error state) before next_* are known: those few calls are
// served from this buffer, and free() ignores its pointers. Each block has a 16-byte header
// holding its size, so realloc can copy it out.
#define BOOT_BYTES (64 * 1024)
static _Alignas(16) unsigned char boot[BOOT_BYTES];
static atomic_size_t boot_used;
static atomic_int resolving;

static int in_boot(const void* p) {
  return (const unsigned char*)p >= boot && (const unsigned char*)p < boot + BOOT_BYTES;
}

static void* boot_alloc(size_t size) {
  size_t need = ((size + 15) & ~(size_t)15) + 16;
  size_t at = atomic_fetch_add_explicit(&boot_used, need, memory_order_relaxed);
  if (at + need > BOOT_BYTES) {
    static const char msg[] = "alloc_count: boot buffer exhausted\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
  }
  memcpy(boot + at, &size, sizeof size);
  return boot + at + 16;
}

static void resolve(void) {
  if (next_free) return;
  atomic_store(&resolving, 1);
  next_malloc = (malloc_fn)dlsym(RTLD_NEXT, "malloc");
  next_calloc = (calloc_fn)dlsym(RTLD_NEXT, "calloc");
  next_realloc = (realloc_fn)dlsym(RTLD_NEXT, "realloc");
  next_aligned_alloc = (aligned_fn)dlsym(RTLD_NEXT, "aligned_alloc");
  next_memalign = (aligned_fn)dlsym(RTLD_NEXT, "memalign");
  next_posix_memalign = (posix_memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
  next_valloc = (malloc_fn)dlsym(RTLD_NEXT, "valloc");
  next_new = (new_fn)dlsym(RTLD_NEXT, "_Znwm");
  next_new_array = (new_fn)dlsym(RTLD_NEXT, "_Znam");
  next_new_nothrow = (new_nothrow_fn)dlsym(RTLD_NEXT, "_ZnwmRKSt9nothrow_t");
  next_new_array_nothrow = (new_nothrow_fn)dlsym(RTLD_NEXT, "_ZnamRKSt9nothrow_t");
  next_new_aligned = (new_aligned_fn)dlsym(RTLD_NEXT, "_ZnwmSt11align_val_t");
  next_new_array_aligned = (new_aligned_fn)dlsym(RTLD_NEXT, "_ZnamSt11align_val_t");
  next_new_aligned_nothrow =
      (new_aligned_nothrow_fn)dlsym(RTLD_NEXT, "_ZnwmSt11align_val_tRKSt9nothrow_t");
  next_new_array_aligned_nothrow =
      (new_aligned_nothrow_fn)dlsym(RTLD_NEXT, "_ZnamSt11align_val_tRKSt9nothrow_t");
  free_fn f = (free_fn)dlsym(RTLD_NEXT, "free");
  if (!next_malloc || !next_calloc || !next_realloc || !f) {
    static const char msg[] = "alloc_count: the next malloc/calloc/realloc/free is not found\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
  }
  next_free = f;  // last: resolve() is done once this is set
  atomic_store(&resolving, 0);
}

static void count_alloc(void) {
  if (!inside_new) atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
}

void* malloc(size_t size) {
  if (!next_free) {
    if (atomic_load(&resolving)) return boot_alloc(size);
    resolve();
  }
  count_alloc();
  return next_malloc(size);
}

void* calloc(size_t n, size_t size) {
  if (!next_free) {
    if (atomic_load(&resolving)) {
      if (size && n > SIZE_MAX / size) return NULL;
      return boot_alloc(n * size);  // static storage: already zero
    }
    resolve();
  }
  count_alloc();
  return next_calloc(n, size);
}

void free(void* p) {
  if (!p || in_boot(p)) return;
  if (!next_free) resolve();
  next_free(p);
}

void* realloc(void* p, size_t size) {
  if (!next_free) {
    if (atomic_load(&resolving)) return boot_alloc(size);  // never seen; copied below if so
    resolve();
  }
  if (in_boot(p)) {  // a boot block grows: move it to the real heap
    size_t old;
    memcpy(&old, (unsigned char*)p - 16, sizeof old);
    void* q = malloc(size);
    if (q) memcpy(q, p, old < size ? old : size);
    return q;
  }
  if (size != 0 || !p) count_alloc();  // realloc(p, 0) frees
  return next_realloc(p, size);
}

void* aligned_alloc(size_t alignment, size_t size) {
  if (!next_free) resolve();
  count_alloc();
  return next_aligned_alloc(alignment, size);
}

void* memalign(size_t alignment, size_t size) {
  if (!next_free) resolve();
  count_alloc();
  return next_memalign(alignment, size);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  if (!next_free) resolve();
  count_alloc();
  return next_posix_memalign(out, alignment, size);
}

void* valloc(size_t size) {
  if (!next_free) resolve();
  count_alloc();
  return next_valloc(size);
}

// operator new and new[] by their mangled names (this file is C). The counter is raised once,
// here; the flag hides the malloc that libstdc++'s new makes inside.
#define COUNTED_NEW(call)                                             \
  do {                                                                \
    if (!next_free) resolve();                                        \
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed); \
    ++inside_new;                                                     \
    void* p = (call);                                                 \
    --inside_new;                                                     \
    return p;                                                         \
  } while (0)

void* _Znwm(size_t size) { COUNTED_NEW(next_new(size)); }
void* _Znam(size_t size) { COUNTED_NEW(next_new_array(size)); }
void* _ZnwmRKSt9nothrow_t(size_t size, const void* tag) {
  COUNTED_NEW(next_new_nothrow(size, tag));
}
void* _ZnamRKSt9nothrow_t(size_t size, const void* tag) {
  COUNTED_NEW(next_new_array_nothrow(size, tag));
}
void* _ZnwmSt11align_val_t(size_t size, size_t alignment) {
  COUNTED_NEW(next_new_aligned(size, alignment));
}
void* _ZnamSt11align_val_t(size_t size, size_t alignment) {
  COUNTED_NEW(next_new_array_aligned(size, alignment));
}
void* _ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t alignment, const void* tag) {
  COUNTED_NEW(next_new_aligned_nothrow(size, alignment, tag));
}
void* _ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t alignment, const void* tag) {
  COUNTED_NEW(next_new_array_aligned_nothrow(size, alignment, tag));
}

// ---- The writer thread ----------------------------------------------------------------------
static char out_path[4096];
static char tmp_path[4096 + 8];

static void write_counts(void) {
  char text[96];
  int n = snprintf(text, sizeof text, "allocations %lu\n",
                   atomic_load_explicit(&allocations, memory_order_relaxed));
  int fd = open(tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  int ok = write(fd, text, (size_t)n) == n;
  close(fd);
  if (ok) rename(tmp_path, out_path);
}

static void* writer(void* arg) {
  (void)arg;
  const struct timespec period = {0, 100 * 1000 * 1000};
  for (;;) {
    write_counts();
    nanosleep(&period, NULL);
  }
  return NULL;
}

__attribute__((constructor)) static void start(void) {
  resolve();
  const char* path = getenv("ALLOC_COUNT_FILE");
  if (!path || !*path || strlen(path) >= sizeof out_path) return;
  memcpy(out_path, path, strlen(path) + 1);
  snprintf(tmp_path, sizeof tmp_path, "%s.tmp", out_path);
  // The thread takes no signal: a server that waits for SIGTERM in one thread of its own still
  // gets it there.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  if (pthread_create(&t, NULL, writer, NULL) == 0) pthread_detach(t);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}
