//! The stand-in CUDA driver of the device-path tests: a small `libcuda.so` built from C
//! with the system compiler into a temporary folder, which implements the driver calls
//! the runtime makes on host memory, and the harness that runs an `#[ignore]`d test in a
//! child process under it. Used by `cuda_stub_driver.rs` (handles, memory, modules,
//! launches), `cuda_device_run_stub.rs` (runs on operands in device memory, on a
//! stream), `cuda_bench_stub.rs` (device timing with events) and the CLI's
//! `bench_gpu.rs`.
//!
//! What it models:
//! - memory: device pointers are `malloc`ed blocks (filled with garbage, so memory the
//!   runtime forgets to clear shows), every copy and set is checked to lie inside one
//!   allocation; each allocation knows its device ordinal, whether it is page-locked
//!   host memory or another context's (for `cuPointerGetAttribute`; the tests make such
//!   memory with [`Stub::alloc_foreign`]), and whether it is stream-ordered
//!   (`cuMemAllocAsync`, freed only by `cuMemFreeAsync`; `-DSTUB_NO_MEMPOOL` makes it
//!   unsupported);
//! - streams: made and destroyed, waited for, and checked on every stream-ordered call
//!   and launch; `cuMemsetD8Async`, `cuMemcpyHtoDAsync` and the stream-ordered
//!   allocations are logged with their stream, as are launches on a made stream;
//! - modules, and launches that run C versions of the test kernels over the whole grid,
//!   faulting (`CUDA_ERROR_ILLEGAL_ADDRESS` at the next wait) on an access outside the
//!   allocations;
//! - events and a clock: a launch advances the device's clock by 0.125 ms and every set
//!   or copy of memory (on any stream) by 1000 ms, and an event records the clock, so
//!   times measured between events say exactly which work fell between them. Events
//!   are recorded on the legacy stream only.
//!
//! Every call checks that the context is current on the calling thread. What the tests
//! read back: [`Stub::count`] (see [`Counter`]), [`Stub::log`] (launches and
//! stream-ordered operations, one a line), both reset (the log, the copy and wait
//! counters and a pending fault) by [`Stub::clear`].

use std::path::{Path, PathBuf};
use std::process::Command;

use sparsile_ir::settings::Settings;
use sparsile_runtime::cuda::CudaDevice;

pub const STUB_NAME: &str = "Sparsile stand-in device";

pub const STUB_C: &str = r#"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum {
    OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, NO_DEVICE = 100,
    INVALID_DEVICE = 101, INVALID_IMAGE = 200, INVALID_CONTEXT = 201, INVALID_HANDLE = 400,
    NOT_FOUND = 500, NOT_READY = 600, ILLEGAL_ADDRESS = 700, NOT_SUPPORTED = 801
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int context_object;
static __thread void *current;
static int initialised, retained, pending;
static long long live_modules, launches, live_events, memsets;
/* The device's clock, in ms: a launch takes 0.125 ms, a set or copy 1000 ms (on any
   stream), so a run timed with events shows whether anything but launches fell between
   them. */
static double clock_ms;
/* Copies host to device (calls, bytes), device to host (calls), waits for a stream and
   for the context. */
static long long htod_calls, htod_bytes, dtoh_calls, stream_syncs, ctx_syncs;
static char log_text[1 << 16];
static int other_context;

/* Each allocation: its device ordinal, whether it is (page-locked) host memory, whether
   it belongs to another context, whether it came from cuMemAllocAsync. */
#define MAX_ALLOCS 4096
static struct { char *p; size_t n; int ordinal, host, foreign_ctx, async_; } allocs[MAX_ALLOCS];

/* Streams are tokens: 0, 1 and 2 are the special streams, the others made by
   cuStreamCreate. */
#define MAX_STREAMS 16
static char stream_tokens[MAX_STREAMS];
static int stream_live[MAX_STREAMS];
/* -1 for an unknown stream, 0 for a special one, k + 1 for the k-th made. */
static int stream_id(void *s) {
    if ((uintptr_t)s <= 2) return 0;
    for (int i = 0; i < MAX_STREAMS; ++i) if (s == (void *)&stream_tokens[i] && stream_live[i]) return i + 1;
    return -1;
}

static void log_line(const char *text) {
    size_t used = strlen(log_text);
    snprintf(log_text + used, sizeof log_text - used, "%s\n", text);
}

struct module { unsigned char *image; size_t size; };
#define MAX_FUNCS 256
static struct { struct module *m; char name[128]; } funcs[MAX_FUNCS];
static int nfuncs;

static CUresult need_context(void) { return current == &context_object ? OK : INVALID_CONTEXT; }

/* Whether [p, p + n) lies inside one allocation. */
static int inside(const void *p, size_t n) {
    for (int i = 0; i < MAX_ALLOCS; ++i)
        if (allocs[i].p && (const char *)p >= allocs[i].p && (const char *)p + n <= allocs[i].p + allocs[i].n)
            return 1;
    return 0;
}

#define GUARDED(body) do { pthread_mutex_lock(&lock); CUresult r_ = need_context(); if (r_ == OK) { body } pthread_mutex_unlock(&lock); return r_; } while (0)

CUresult cuInit(unsigned flags) {
#ifdef STUB_NO_DEVICE
    return NO_DEVICE;
#endif
    initialised = 1;
    return flags == 0 ? OK : INVALID_VALUE;
}
CUresult cuDeviceGetCount(int *n) { if (!initialised) return NOT_INITIALIZED; *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int ordinal) { if (ordinal != 0) return INVALID_DEVICE; *d = 0; return OK; }
CUresult cuDeviceGetAttribute(int *v, int attribute, int d) {
    if (d != 0) return INVALID_DEVICE;
    *v = attribute == 75 ? 8 : attribute == 76 ? 0 : 1;
    return OK;
}
#ifndef STUB_WITHOUT_NAME
CUresult cuDeviceGetName(char *name, int len, int d) { snprintf(name, len, "%s", "Sparsile stand-in device"); return OK; }
#endif
CUresult cuDevicePrimaryCtxRetain(void **ctx, int d) { pthread_mutex_lock(&lock); ++retained; pthread_mutex_unlock(&lock); *ctx = &context_object; return OK; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) {
    pthread_mutex_lock(&lock); CUresult r = retained > 0 ? (--retained, OK) : INVALID_CONTEXT; pthread_mutex_unlock(&lock); return r;
}
CUresult cuCtxSetCurrent(void *ctx) { if (ctx != &context_object) return INVALID_CONTEXT; current = ctx; return OK; }
CUresult cuCtxSynchronize(void) { GUARDED( ++ctx_syncs; r_ = pending; ); }

/* An allocation of n bytes (filled with garbage) in slot *slot; call with the lock. */
static CUresult alloc_block(unsigned long long *p, size_t n, int *slot) {
    if (n == 0) return INVALID_VALUE;
    if (n > ((size_t)1 << 36)) return OUT_OF_MEMORY;
    int i = 0;
    while (i < MAX_ALLOCS && allocs[i].p) ++i;
    if (i == MAX_ALLOCS) return OUT_OF_MEMORY;
    allocs[i].p = malloc(n); allocs[i].n = n;
    allocs[i].ordinal = 0; allocs[i].host = 0; allocs[i].foreign_ctx = 0; allocs[i].async_ = 0;
    memset(allocs[i].p, 0xab, n);
    *p = (unsigned long long)(uintptr_t)allocs[i].p;
    *slot = i;
    return OK;
}
/* The allocation holding byte p, or -1. */
static int find_alloc(unsigned long long p) {
    for (int i = 0; i < MAX_ALLOCS; ++i)
        if (allocs[i].p && (char *)(uintptr_t)p >= allocs[i].p && (char *)(uintptr_t)p < allocs[i].p + allocs[i].n)
            return i;
    return -1;
}
/* Frees the allocation starting at p (async_: -1 either kind, else that kind only). */
static CUresult free_block(unsigned long long p, int async_) {
    for (int i = 0; i < MAX_ALLOCS; ++i)
        if (allocs[i].p == (char *)(uintptr_t)p) {
            if (async_ >= 0 && allocs[i].async_ != async_) return INVALID_VALUE;
            free(allocs[i].p); allocs[i].p = 0; return OK;
        }
    return INVALID_VALUE;
}

CUresult cuMemAlloc_v2(unsigned long long *p, size_t n) {
    int slot;
    GUARDED( r_ = alloc_block(p, n, &slot); );
}
CUresult cuMemFree_v2(unsigned long long p) {
    GUARDED( r_ = free_block(p, 0); );
}

CUresult cuStreamCreate(void **s, unsigned flags) {
    GUARDED(
        int i = 0;
        while (i < MAX_STREAMS && stream_live[i]) ++i;
        if (i == MAX_STREAMS) r_ = OUT_OF_MEMORY;
        else { stream_live[i] = 1; *s = &stream_tokens[i]; }
    );
}
CUresult cuStreamDestroy_v2(void *s) {
    GUARDED( int id = stream_id(s); if (id <= 0) r_ = INVALID_HANDLE; else stream_live[id - 1] = 0; );
}
CUresult cuStreamSynchronize(void *s) {
    GUARDED( if (stream_id(s) < 0) r_ = INVALID_HANDLE; else { ++stream_syncs; r_ = pending; } );
}
CUresult cuMemAllocAsync(unsigned long long *p, size_t n, void *s) {
#ifdef STUB_NO_MEMPOOL
    return NOT_SUPPORTED;
#endif
    GUARDED(
        int id = stream_id(s); int slot;
        if (id < 0) r_ = INVALID_HANDLE;
        else if ((r_ = alloc_block(p, n, &slot)) == OK) {
            char line[64];
            allocs[slot].async_ = 1;
            snprintf(line, sizeof line, "allocAsync %zu s%d", n, id);
            log_line(line);
        }
    );
}
CUresult cuMemFreeAsync(unsigned long long p, void *s) {
    GUARDED(
        int id = stream_id(s);
        if (id < 0) r_ = INVALID_HANDLE;
        else if ((r_ = free_block(p, 1)) == OK) {
            char line[64];
            snprintf(line, sizeof line, "freeAsync s%d", id);
            log_line(line);
        }
    );
}
CUresult cuMemsetD8Async(unsigned long long p, unsigned char v, size_t n, void *s) {
    GUARDED(
        int id = stream_id(s);
        if (id < 0) r_ = INVALID_HANDLE;
        else if (!inside((void *)(uintptr_t)p, n)) r_ = INVALID_VALUE;
        else {
            char line[64];
            memset((void *)(uintptr_t)p, v, n);
            ++memsets; clock_ms += 1000.0;
            snprintf(line, sizeof line, "memsetAsync %zu s%d", n, id);
            log_line(line);
        }
    );
}
CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t n, void *s) {
    GUARDED(
        int id = stream_id(s);
        if (id < 0) r_ = INVALID_HANDLE;
        else if (!inside((void *)(uintptr_t)dst, n)) r_ = INVALID_VALUE;
        else {
            char line[64];
            memcpy((void *)(uintptr_t)dst, src, n);
            ++htod_calls; htod_bytes += n; clock_ms += 1000.0;
            snprintf(line, sizeof line, "HtoDAsync %zu s%d", n, id);
            log_line(line);
        }
    );
}
/* CU_POINTER_ATTRIBUTE_CONTEXT (1), _MEMORY_TYPE (2), _DEVICE_ORDINAL (9). */
CUresult cuPointerGetAttribute(void *data, int attribute, unsigned long long p) {
    GUARDED(
        int i = find_alloc(p);
        if (i < 0) r_ = INVALID_VALUE;
        else if (attribute == 1) *(void **)data = allocs[i].foreign_ctx ? (void *)&other_context : (void *)&context_object;
        else if (attribute == 2) *(unsigned *)data = allocs[i].host ? 1 : 2;
        else if (attribute == 9) *(int *)data = allocs[i].ordinal;
        else r_ = INVALID_VALUE;
    );
}
CUresult cuMemsetD8_v2(unsigned long long p, unsigned char v, size_t n) {
    GUARDED( if (!inside((void *)(uintptr_t)p, n)) r_ = INVALID_VALUE; else { memset((void *)(uintptr_t)p, v, n); ++memsets; clock_ms += 1000.0; } );
}
CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n) {
    GUARDED( if (!inside((void *)(uintptr_t)dst, n)) r_ = INVALID_VALUE; else { memcpy((void *)(uintptr_t)dst, src, n); ++htod_calls; htod_bytes += n; clock_ms += 1000.0; } );
}
CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n) {
    GUARDED( if (!inside((void *)(uintptr_t)src, n)) r_ = INVALID_VALUE; else { memcpy(dst, (void *)(uintptr_t)src, n); ++dtoh_calls; clock_ms += 1000.0; } );
}

/* Events: the clock when recorded. Recording needs the legacy stream (null), the one
   the launches of a timed run go to. */
struct event { int recorded; double at; };
CUresult cuEventCreate(void **e, unsigned flags) {
    GUARDED(
        if (flags != 0) r_ = INVALID_VALUE;
        else { struct event *ev = calloc(1, sizeof *ev); *e = ev; ++live_events; }
    );
}
CUresult cuEventDestroy_v2(void *e) { GUARDED( free(e); --live_events; ); }
CUresult cuEventRecord(void *e, void *stream) {
    GUARDED(
        if (stream) r_ = INVALID_VALUE;
        else { struct event *ev = e; ev->recorded = 1; ev->at = clock_ms; }
    );
}
CUresult cuEventSynchronize(void *e) {
    GUARDED( struct event *ev = e; r_ = pending ? pending : ev->recorded ? OK : NOT_READY; );
}
CUresult cuEventElapsedTime(float *ms, void *start, void *end) {
    GUARDED(
        struct event *a = start;
        struct event *b = end;
        if (!a->recorded || !b->recorded) r_ = NOT_READY;
        else *ms = (float)(b->at - a->at);
    );
}

/* The size of the ELF64 image at p: its section headers come last. */
static size_t elf_size(const unsigned char *p) {
    uint64_t shoff; uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8); memcpy(&shentsize, p + 0x3a, 2); memcpy(&shnum, p + 0x3c, 2);
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
}

CUresult cuModuleLoadData(void **module, const void *image) {
    GUARDED(
        const unsigned char *p = image;
        if (memcmp(p, "\177ELF", 4) != 0 || p[4] != 2) r_ = INVALID_IMAGE;
        else {
            struct module *m = malloc(sizeof *m);
            m->size = elf_size(p);
            m->image = malloc(m->size);
            memcpy(m->image, p, m->size);
            *module = m; ++live_modules;
        }
    );
}
CUresult cuModuleUnload(void *module) {
    GUARDED(
        struct module *m = module;
        for (int i = 0; i < nfuncs; ++i) if (funcs[i].m == m) funcs[i].m = 0;
        free(m->image); free(m); --live_modules;
    );
}
CUresult cuModuleGetFunction(void **f, void *module, const char *name) {
    GUARDED(
        struct module *m = module;
        size_t len = strlen(name) + 1;
        int found = 0;
        for (size_t i = 0; i + len <= m->size && !found; ++i) found = memcmp(m->image + i, name, len) == 0;
        if (!found || len > sizeof funcs[0].name || nfuncs == MAX_FUNCS) r_ = NOT_FOUND;
        else { funcs[nfuncs].m = m; memcpy(funcs[nfuncs].name, name, len); *f = &funcs[nfuncs]; ++nfuncs; }
    );
}

/* Loads and stores that fault (pending = ILLEGAL_ADDRESS) outside the allocations. */
static void fault(void) { pending = ILLEGAL_ADDRESS; }
#define LD(T, base, i) (inside((base) + (i), sizeof(T)) ? (base)[i] : (fault(), (T)0))
#define ST(base, i, v) do { if (inside((base) + (i), sizeof *(base))) (base)[i] = (v); else fault(); } while (0)
#define ARG(T, k) (*(T *)params[k])

static void run_kernel(const char *name, unsigned gx, unsigned bx, void **params) {
    if (strcmp(name, "spmv_rows") == 0) {
        long long m = ARG(long long, 0);
        const float *A = ARG(const float *, 1), *x = ARG(const float *, 2);
        const int *indptr = ARG(const int *, 3), *indices = ARG(const int *, 4);
        float *partial = ARG(float *, 5);
        for (long long b = 0; b < gx; ++b)
            for (long long t = 0; t < bx; ++t) {
                long long i = b * 128 + t;
                if (i < m) {
                    float acc = 0.0f;
                    for (long long jp = LD(int, indptr, i); jp < LD(int, indptr, i + 1); ++jp)
                        acc = acc + LD(float, A, jp) * LD(float, x, LD(int, indices, jp));
                    ST(partial, i, acc);
                }
            }
    } else if (strcmp(name, "spmv_store") == 0) {
        long long m = ARG(long long, 0);
        float *y = ARG(float *, 1);
        const float *partial = ARG(const float *, 2);
        for (long long b = 0; b < gx; ++b)
            for (long long t = 0; t < bx; ++t)
                if (b * 256 + t < m) ST(y, b * 256 + t, LD(float, partial, b * 256 + t));
    } else if (strcmp(name, "spmvacc_rows") == 0) {
        /* Adds each row's products into `partial`, which must be zero at the start. */
        long long m = ARG(long long, 0);
        const float *A = ARG(const float *, 1), *x = ARG(const float *, 2);
        const int *indptr = ARG(const int *, 3), *indices = ARG(const int *, 4);
        float *partial = ARG(float *, 5);
        for (long long b = 0; b < gx; ++b)
            for (long long t = 0; t < bx; ++t) {
                long long i = b * 128 + t;
                if (i < m)
                    for (long long jp = LD(int, indptr, i); jp < LD(int, indptr, i + 1); ++jp)
                        ST(partial, i, LD(float, partial, i) + LD(float, A, jp) * LD(float, x, LD(int, indices, jp)));
            }
    } else if (strcmp(name, "spmvacc_store") == 0) {
        long long m = ARG(long long, 0);
        float *y = ARG(float *, 1);
        const float *partial = ARG(const float *, 2);
        for (long long b = 0; b < gx; ++b)
            for (long long t = 0; t < bx; ++t)
                if (b * 256 + t < m) ST(y, b * 256 + t, LD(float, partial, b * 256 + t));
    } else if (strcmp(name, "spmv_never") == 0) {
        long long m = ARG(long long, 0);
        float *y = ARG(float *, 1);
        for (long long b = 0; b < gx; ++b)
            for (long long t = 0; t < bx; ++t)
                if (b * 32 + t < m) ST(y, b * 32 + t, 0.0f);
    } else {
        pending = ILLEGAL_ADDRESS;
    }
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    GUARDED(
        const char *name = 0;
        int known = 0; int sid = stream_id(stream);
        for (int i = 0; i < nfuncs; ++i) if ((void *)&funcs[i] == f && funcs[i].m) { known = 1; name = funcs[i].name; }
        if (sid < 0) r_ = INVALID_HANDLE;
        else if (!known || extra || !params || !gx || !gy || !gz || bx * by * bz > 1024) r_ = INVALID_VALUE;
        else {
            size_t used = strlen(log_text);
            /* Launches on a made stream name it. */
            if (sid > 0)
                snprintf(log_text + used, sizeof log_text - used, "%s %u %u %u %u %u %u %u s%d\n", name, gx, gy, gz, bx, by, bz, shared, sid);
            else
                snprintf(log_text + used, sizeof log_text - used, "%s %u %u %u %u %u %u %u\n", name, gx, gy, gz, bx, by, bz, shared);
            ++launches;
            clock_ms += 0.125;
            run_kernel(name, gx, bx, params);
        }
    );
}

CUresult cuGetErrorName(CUresult e, const char **s) {
    switch (e) {
    case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
    case ILLEGAL_ADDRESS: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return OK;
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; return OK;
    default: return INVALID_VALUE;
    }
}
CUresult cuGetErrorString(CUresult e, const char **s) {
    switch (e) {
    case OUT_OF_MEMORY: *s = "out of memory"; return OK;
    case ILLEGAL_ADDRESS: *s = "an illegal memory access was encountered"; return OK;
    case INVALID_VALUE: *s = "invalid argument"; return OK;
    default: return INVALID_VALUE;
    }
}

/* For the tests: what is live, what was done (see `Counter` in stub.rs), and the log
   of launches and stream-ordered operations. */
long long stub_count(int what) {
    long long n = 0;
    pthread_mutex_lock(&lock);
    if (what == 0) { for (int i = 0; i < MAX_ALLOCS; ++i) n += allocs[i].p != 0; }
    else if (what == 1) n = live_modules;
    else if (what == 2) n = retained;
    else if (what == 3) n = launches;
    else if (what == 4) n = live_events;
    else if (what == 5) n = memsets;
    else if (what == 6) n = htod_calls;
    else if (what == 7) n = htod_bytes;
    else if (what == 8) n = dtoh_calls;
    else if (what == 9) n = stream_syncs;
    else if (what == 10) n = ctx_syncs;
    else if (what == 11) { for (int i = 0; i < MAX_STREAMS; ++i) n += stream_live[i]; }
    pthread_mutex_unlock(&lock);
    return n;
}
const char *stub_log(void) { return log_text; }
void stub_clear(void) {
    pthread_mutex_lock(&lock);
    log_text[0] = 0; pending = 0;
    htod_calls = htod_bytes = dtoh_calls = stream_syncs = ctx_syncs = 0;
    pthread_mutex_unlock(&lock);
}
/* Memory the runtime did not allocate: on device `ordinal`, or page-locked host memory,
   or of another context. */
unsigned long long stub_alloc_foreign(size_t n, int ordinal, int host, int foreign_ctx) {
    unsigned long long p = 0;
    int slot;
    pthread_mutex_lock(&lock);
    if (alloc_block(&p, n, &slot) == OK) {
        allocs[slot].ordinal = ordinal; allocs[slot].host = host; allocs[slot].foreign_ctx = foreign_ctx;
    }
    pthread_mutex_unlock(&lock);
    return p;
}
void stub_free_foreign(unsigned long long p) { pthread_mutex_lock(&lock); free_block(p, -1); pthread_mutex_unlock(&lock); }
"#;

/// Builds the stand-in driver (with `defines`) as `<dir>/libcuda.so`, or `None` when
/// no C compiler runs.
pub fn build_stub(dir: &Path, defines: &[&str]) -> Option<PathBuf> {
    let source = dir.join("stub_cuda.c");
    std::fs::write(&source, STUB_C).unwrap();
    let library = dir.join("libcuda.so");
    let cc = Settings::from_env().cc.unwrap_or_else(|| "cc".to_string());
    let mut words = cc.split_whitespace();
    let mut command = Command::new(words.next().unwrap());
    command.args(words);
    let status = command
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&library)
        .arg(&source)
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg("-lpthread")
        .status();
    match status {
        Ok(s) if s.success() => Some(library),
        Ok(s) => panic!("the stand-in driver does not compile ({s})"),
        Err(e) => {
            println!("skipped: no C compiler ({cc}: {e})");
            None
        }
    }
}

/// Runs the ignored test `inner` in a child process under the stand-in driver built
/// with `defines`; returns its output, or `None` when no stand-in could be built.
pub fn run_under_stub(inner: &str, defines: &[&str]) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    build_stub(dir.path(), defines)?;
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            inner,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LD_LIBRARY_PATH", dir.path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{inner} failed under the stand-in driver:\n{text}"
    );
    Some(text)
}

/// What [`Stub::count`] reads (`stub_count`'s argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Counter {
    /// Live allocations (the runtime's and [`Stub::alloc_foreign`]'s).
    Allocations = 0,
    /// Live modules.
    Modules = 1,
    /// Retained primary contexts.
    Contexts = 2,
    /// Launches, ever.
    Launches = 3,
    /// Live events.
    Events = 4,
    /// Sets of memory (`cuMemsetD8`, `cuMemsetD8Async`), ever.
    Memsets = 5,
    /// Host-to-device copies (plain and stream-ordered) since the last clear.
    HtoDCalls = 6,
    /// Their bytes.
    HtoDBytes = 7,
    /// Device-to-host copies since the last clear.
    DtoHCalls = 8,
    /// Waits for a stream since the last clear.
    StreamSyncs = 9,
    /// Waits for the context since the last clear.
    ContextSyncs = 10,
    /// Live streams made by `cuStreamCreate`.
    Streams = 11,
}

/// Functions of the stand-in, reached through the library the runtime loaded.
pub struct Stub {
    lib: libloading::Library,
}

impl Stub {
    pub fn open() -> Stub {
        // SAFETY: the stand-in is already loaded (by the runtime); opening it again
        // runs no initialisers.
        Stub {
            lib: unsafe { libloading::Library::new("libcuda.so") }.unwrap(),
        }
    }

    pub fn count(&self, what: Counter) -> i64 {
        // SAFETY: `long long stub_count(int)` in the stand-in.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(i32) -> i64>(b"stub_count")
                .unwrap();
            f(what as i32)
        }
    }

    /// (allocations, modules, retained contexts) now live.
    pub fn live(&self) -> (i64, i64, i64) {
        (
            self.count(Counter::Allocations),
            self.count(Counter::Modules),
            self.count(Counter::Contexts),
        )
    }

    pub fn log(&self) -> String {
        // SAFETY: `const char *stub_log(void)`, a NUL-terminated static buffer.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn() -> *const std::ffi::c_char>(b"stub_log")
                .unwrap();
            std::ffi::CStr::from_ptr(f()).to_string_lossy().into_owned()
        }
    }

    pub fn clear(&self) {
        // SAFETY: `void stub_clear(void)`.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn()>(b"stub_clear")
                .unwrap();
            f()
        }
    }

    /// (host-to-device copies, their bytes, device-to-host copies, stream waits,
    /// context waits) since the last `clear`.
    pub fn copies(&self) -> (i64, i64, i64, i64, i64) {
        (
            self.count(Counter::HtoDCalls),
            self.count(Counter::HtoDBytes),
            self.count(Counter::DtoHCalls),
            self.count(Counter::StreamSyncs),
            self.count(Counter::ContextSyncs),
        )
    }

    /// `bytes` of memory the runtime did not allocate: on device `ordinal`, or
    /// page-locked host memory (`host`), or of another context (`other_context`).
    pub fn alloc_foreign(
        &self,
        bytes: usize,
        ordinal: i32,
        host: bool,
        other_context: bool,
    ) -> u64 {
        // SAFETY: `unsigned long long stub_alloc_foreign(size_t, int, int, int)`.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(usize, i32, i32, i32) -> u64>(b"stub_alloc_foreign")
                .unwrap();
            f(bytes, ordinal, i32::from(host), i32::from(other_context))
        }
    }

    pub fn free_foreign(&self, ptr: u64) {
        // SAFETY: `void stub_free_foreign(unsigned long long)`.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(u64)>(b"stub_free_foreign")
                .unwrap();
            f(ptr)
        }
    }
}

/// The device under the stand-in, or `None` (after saying so) without it.
pub fn stub_device(test: &str) -> Option<CudaDevice> {
    match CudaDevice::open(0) {
        Ok(d) if d.name() == STUB_NAME => Some(d),
        Ok(d) => {
            println!("{test}: skipped, a real device ({}) is here", d.name());
            None
        }
        Err(e) => {
            println!("{test}: skipped, not under the stand-in driver: {e}");
            None
        }
    }
}

/// A minimal ELF64 image whose string data holds `names` (enough for the stand-in,
/// which looks names up in the image).
pub fn fake_elf(names: &[&str]) -> Vec<u8> {
    let mut strings = Vec::new();
    for n in names {
        strings.extend_from_slice(n.as_bytes());
        strings.push(0);
    }
    let shoff = 64 + strings.len() as u64;
    let mut image = vec![0u8; 64];
    image[..4].copy_from_slice(b"\x7fELF");
    image[4] = 2; // 64-bit
    image[5] = 1; // little-endian
    image[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    image[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    image[0x3c..0x3e].copy_from_slice(&1u16.to_le_bytes());
    image.extend_from_slice(&strings);
    image.extend_from_slice(&[0u8; 64]);
    image
}
