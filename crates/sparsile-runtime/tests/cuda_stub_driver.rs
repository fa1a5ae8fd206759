//! The device path of the CUDA runtime, run against a stand-in CUDA driver.
//!
//! This machine may have no GPU, so these tests build a small `libcuda.so` of their own
//! (C, compiled with the system compiler into a temporary folder) that implements the
//! driver calls the runtime makes on host memory: device pointers are `malloc`ed
//! blocks (filled with garbage, so memory the runtime forgets to clear shows), every
//! copy and set is checked to lie inside one allocation, every call checks that the
//! context is current on the calling thread, and `cuLaunchKernel` runs C versions of
//! the SpMV kernels of `cuda_support` over the whole grid, reading each argument the
//! way the CUDA source declares it. It records the launches and counts what is live.
//!
//! Each check runs in a child process (this test binary, one `#[ignore]`d test, with
//! `LD_LIBRARY_PATH` pointing at the stand-in) because the loader reads that variable
//! only when a process starts. The children say what they checked; the parents require
//! it. Run alone (`--ignored`) without the stand-in, the children skip.
//!
//! What this shows: the runtime's handles (context, memory, modules), argument
//! marshalling, grid computation and skipping, zero-filling, copies back, release of
//! everything, and that a missing driver entry point or a kernel fault is a typed error.
//! What it cannot show: that real GPUs run the cubins (see `cuda_device.rs`).

mod cuda_support;

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use cuda_support::*;
use sparsile_formats::{AxisStorage, SparseTensor, Structure, Values};
use sparsile_ir::settings::Settings;
use sparsile_ir::DType;
use sparsile_runtime::cuda::{
    dense_structure, operand_cache, CubinCache, CudaDevice, CudaError, CudaKernel, CudaStream,
    DeviceArray, DeviceBuffer, DeviceInput, DeviceValues, LaunchArg, LaunchConfig, Nvrtc,
    OutputSpec,
};
use sparsile_runtime::jit::CacheOutcome;
use sparsile_runtime::{KernelOptions, Outputs};

const STUB_NAME: &str = "Sparsile stand-in device";

const STUB_C: &str = r#"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum {
    OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, NO_DEVICE = 100,
    INVALID_DEVICE = 101, INVALID_IMAGE = 200, INVALID_CONTEXT = 201, INVALID_HANDLE = 400,
    NOT_FOUND = 500, ILLEGAL_ADDRESS = 700, NOT_SUPPORTED = 801
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int context_object;
static __thread void *current;
static int initialised, retained, pending;
static long long live_modules, launches;
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
            ++htod_calls; htod_bytes += n;
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
    GUARDED( if (!inside((void *)(uintptr_t)p, n)) r_ = INVALID_VALUE; else memset((void *)(uintptr_t)p, v, n); );
}
CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n) {
    GUARDED( if (!inside((void *)(uintptr_t)dst, n)) r_ = INVALID_VALUE; else { memcpy((void *)(uintptr_t)dst, src, n); ++htod_calls; htod_bytes += n; } );
}
CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n) {
    GUARDED( if (!inside((void *)(uintptr_t)src, n)) r_ = INVALID_VALUE; else { memcpy(dst, (void *)(uintptr_t)src, n); ++dtoh_calls; } );
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

/* For the tests: what is live, and the launch log. */
long long stub_count(int what) {
    long long n = 0;
    pthread_mutex_lock(&lock);
    if (what == 0) { for (int i = 0; i < MAX_ALLOCS; ++i) n += allocs[i].p != 0; }
    else if (what == 1) n = live_modules;
    else if (what == 2) n = retained;
    else if (what == 3) n = launches;
    else if (what == 4) n = htod_calls;
    else if (what == 5) n = htod_bytes;
    else if (what == 6) n = dtoh_calls;
    else if (what == 7) n = stream_syncs;
    else if (what == 8) n = ctx_syncs;
    else if (what == 9) { for (int i = 0; i < MAX_STREAMS; ++i) n += stream_live[i]; }
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
fn build_stub(dir: &Path, defines: &[&str]) -> Option<PathBuf> {
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
fn run_under_stub(inner: &str, defines: &[&str]) -> Option<String> {
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

/// Functions of the stand-in, reached through the library the runtime loaded.
struct Stub {
    lib: libloading::Library,
}

impl Stub {
    fn open() -> Stub {
        // SAFETY: the stand-in is already loaded (by the runtime); opening it again
        // runs no initialisers.
        Stub {
            lib: unsafe { libloading::Library::new("libcuda.so") }.unwrap(),
        }
    }

    fn count(&self, what: i32) -> i64 {
        // SAFETY: `long long stub_count(int)` in the stand-in.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(i32) -> i64>(b"stub_count")
                .unwrap();
            f(what)
        }
    }

    /// (allocations, modules, retained contexts) now live.
    fn live(&self) -> (i64, i64, i64) {
        (self.count(0), self.count(1), self.count(2))
    }

    fn log(&self) -> String {
        // SAFETY: `const char *stub_log(void)`, a NUL-terminated static buffer.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn() -> *const std::ffi::c_char>(b"stub_log")
                .unwrap();
            std::ffi::CStr::from_ptr(f()).to_string_lossy().into_owned()
        }
    }

    fn clear(&self) {
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
    fn copies(&self) -> (i64, i64, i64, i64, i64) {
        (
            self.count(4),
            self.count(5),
            self.count(6),
            self.count(7),
            self.count(8),
        )
    }

    /// `bytes` of memory the runtime did not allocate: on device `ordinal`, or
    /// page-locked host memory (`host`), or of another context (`other_context`).
    fn alloc_foreign(&self, bytes: usize, ordinal: i32, host: bool, other_context: bool) -> u64 {
        // SAFETY: `unsigned long long stub_alloc_foreign(size_t, int, int, int)`.
        unsafe {
            let f = self
                .lib
                .get::<unsafe extern "C" fn(usize, i32, i32, i32) -> u64>(b"stub_alloc_foreign")
                .unwrap();
            f(bytes, ordinal, i32::from(host), i32::from(other_context))
        }
    }

    fn free_foreign(&self, ptr: u64) {
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
fn stub_device(test: &str) -> Option<CudaDevice> {
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

#[test]
fn the_device_path_runs_against_a_stand_in_driver() {
    let Some(text) = run_under_stub("stub_device_path", &[]) else {
        return;
    };
    assert!(text.contains("stub: device checks passed"), "{text}");
    let settings = Settings::from_env();
    if settings.nvrtc.is_some() || Nvrtc::load(&settings).is_ok() {
        assert!(text.contains("stub: kernel checks passed"), "{text}");
    } else {
        println!("the kernel checks were skipped: no NVRTC");
    }
}

#[test]
#[ignore = "run by the_device_path_runs_against_a_stand_in_driver under the stand-in"]
fn stub_device_path() {
    let Some(device) = stub_device("stub_device_path") else {
        return;
    };
    let stub = Stub::open();
    assert_eq!(device.compute_capability(), "sm_80");
    assert_eq!(stub.live(), (0, 0, 1));

    // Memory: zeroed, uploaded, downloaded; copies larger than a buffer refused.
    let zeros = device.alloc_zeroed(24).unwrap();
    let mut back = [1.0f64; 3];
    device.download(&zeros, &mut back).unwrap();
    assert_eq!(back, [0.0; 3]);
    let data = device.upload(&[1i32, -2, 3]).unwrap();
    let mut ints = [0i32; 3];
    device.download(&data, &mut ints).unwrap();
    assert_eq!(ints, [1, -2, 3]);
    let err = device.download(&data, &mut [0i64; 2]).unwrap_err();
    assert!(matches!(err, CudaError::Misuse { .. }), "{err:?}");
    let empty = device.upload::<f32>(&[]).unwrap();
    assert_eq!(empty.bytes(), 1);
    assert_eq!(stub.live().0, 3);
    // A buffer dropped on another thread is freed there (with the context made current).
    std::thread::spawn(move || drop(data)).join().unwrap();
    assert_eq!(stub.live().0, 2);
    drop((zeros, empty));
    assert_eq!(stub.live().0, 0);
    let err = device.alloc_zeroed(1 << 40).unwrap_err();
    assert!(
        matches!(&err, CudaError::Driver { call: "cuMemAlloc", code: 2, message } if message.contains("CUDA_ERROR_OUT_OF_MEMORY")),
        "{err:?}"
    );
    assert!(err.to_string().contains("free device memory"), "{err}");

    // Modules: only ELF images; kernels looked up by name.
    let err = device.load_module(b"not a cubin").unwrap_err();
    assert!(matches!(err, CudaError::Misuse { .. }), "{err:?}");
    let image = fake_elf(&["spmv_never"]);
    let module = device.load_module(&image).unwrap();
    let err = module.function("spmv_missing").unwrap_err();
    assert!(
        matches!(&err, CudaError::MissingKernel { symbol } if symbol == "spmv_missing"),
        "{err:?}"
    );
    let never = module.function("spmv_never").unwrap();
    assert_eq!(stub.live().1, 1);

    // A launch: the arguments arrive as the kernel declares them.
    let y = device.upload(&[5.0f32; 40]).unwrap();
    let config = LaunchConfig {
        grid: [2, 1, 1],
        block: [32, 1, 1],
        shared_bytes: 0,
    };
    // SAFETY: spmv_never(long long m, float *y) writes y[0..m) for m = 40 blocks' worth.
    unsafe {
        device
            .launch(&never, config, &[LaunchArg::I64(40), LaunchArg::Buffer(&y)])
            .unwrap()
    };
    device.synchronize().unwrap();
    let mut out = [1.0f32; 40];
    device.download(&y, &mut out).unwrap();
    assert_eq!(out, [0.0; 40]);
    assert_eq!(stub.log(), "spmv_never 2 1 1 32 1 1 0\n");

    // A kernel that faults is reported when the device is synchronised.
    let small = device.upload(&[5.0f32; 8]).unwrap();
    // SAFETY (for the runtime; the stand-in checks every access): the kernel writes
    // past the end of `small`, which is the fault this checks.
    unsafe {
        device
            .launch(
                &never,
                config,
                &[LaunchArg::I64(40), LaunchArg::Buffer(&small)],
            )
            .unwrap()
    };
    let err = device.synchronize().unwrap_err();
    assert!(
        matches!(
            &err,
            CudaError::Driver {
                call: "cuCtxSynchronize",
                code: 700,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("illegal memory access"), "{err}");
    assert!(err.to_string().contains("a kernel faulted"), "{err}");
    stub.clear();
    drop((never, module, y, small));
    assert_eq!(stub.live(), (0, 0, 1));
    drop(device);
    assert_eq!(
        stub.live(),
        (0, 0, 0),
        "the context is released with the last handle"
    );
    println!("stub: device checks passed");

    stub_kernel_path(&stub);
}

/// The SpMV kernel built and run through `CudaKernel` (needs NVRTC for the cubin the
/// stand-in loads).
fn stub_kernel_path(stub: &Stub) {
    let settings = Settings::from_env();
    let nvrtc = match Nvrtc::load(&settings) {
        Ok(n) => n,
        Err(e) if settings.nvrtc.is_none() => {
            println!("stub: kernel checks skipped, no NVRTC: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_dir: Some(dir.path().to_path_buf()),
        ..settings
    };
    let kernel = CudaKernel::build(
        program(),
        gpu_func(),
        SPMV_CU.to_string(),
        plan(),
        &settings,
    )
    .unwrap();
    let info = kernel.compile_info().clone();
    assert_eq!(info.arch, "sm_80", "the device's own architecture");
    assert_eq!(info.outcome, CacheOutcome::Miss);
    let cache = CubinCache::with_nvrtc(dir.path().join("cuda"), nvrtc).unwrap();
    assert_eq!(info.cubin, cache.cubin_path(SPMV_CU, "sm_80"));
    assert!(info.cubin.exists());
    assert_eq!(stub.live(), (0, 1, 1));

    for (seed, m, n) in [(1, 300, 70), (2, 1, 5), (3, 1000, 3), (5, 129, 129)] {
        stub.clear();
        let inputs = inputs(seed, m, n);
        let outputs = kernel.run(&inputs, &KernelOptions::default()).unwrap();
        assert_matches_interpreter(&outputs, &inputs);
        // `never` is skipped: its grid, A_indptr[m] - nnz, is empty.
        let rows = m.div_ceil(128);
        let stores = m.div_ceil(256);
        assert_eq!(
            stub.log(),
            format!("spmv_rows {rows} 1 1 128 1 1 0\nspmv_store {stores} 1 1 256 1 1 0\n"),
            "m = {m}"
        );
        assert_eq!(stub.live(), (0, 1, 1), "the run's device memory is freed");
    }

    // No rows: every grid is empty, nothing is launched or copied, y is empty.
    stub.clear();
    let empty = inputs(4, 0, 4);
    let outputs = kernel.run(&empty, &KernelOptions::default()).unwrap();
    assert_eq!(stub.log(), "");
    assert_matches_interpreter(&outputs, &empty);

    // From another thread, where the context is not current yet.
    std::thread::scope(|s| {
        s.spawn(|| {
            let inputs = inputs(9, 50, 20);
            let outputs = kernel.run(&inputs, &KernelOptions::default()).unwrap();
            assert_matches_interpreter(&outputs, &inputs);
        });
    });

    // A kernel missing from the source is named.
    let mut renamed = plan();
    renamed.kernels[2].symbol = "spmv_gone".into();
    let err = CudaKernel::build(
        program(),
        gpu_func(),
        SPMV_CU.to_string(),
        renamed,
        &settings,
    )
    .unwrap_err();
    assert!(
        matches!(&err, CudaError::MissingKernel { symbol } if symbol == "spmv_gone"),
        "{err:?}"
    );

    // Built again: the cubin comes from the cache; a truncated one is rebuilt.
    let again = CudaKernel::build(
        program(),
        gpu_func(),
        SPMV_CU.to_string(),
        plan(),
        &settings,
    )
    .unwrap();
    assert_eq!(again.compile_info().outcome, CacheOutcome::Hit);
    let bytes = std::fs::read(&info.cubin).unwrap();
    std::fs::write(&info.cubin, &bytes[..100]).unwrap();
    let rebuilt = CudaKernel::build(
        program(),
        gpu_func(),
        SPMV_CU.to_string(),
        plan(),
        &settings,
    )
    .unwrap();
    assert_eq!(rebuilt.compile_info().outcome, CacheOutcome::Miss);
    let inputs = inputs(10, 70, 30);
    assert_matches_interpreter(
        &rebuilt.run(&inputs, &KernelOptions::default()).unwrap(),
        &inputs,
    );

    drop((kernel, again, rebuilt));
    assert_eq!(stub.live(), (0, 0, 0), "modules and contexts are released");
    println!("stub: kernel checks passed");
}

/// A minimal ELF64 image whose string data holds `names` (enough for the stand-in,
/// which looks names up in the image).
fn fake_elf(names: &[&str]) -> Vec<u8> {
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

#[test]
fn a_driver_without_an_entry_point_is_a_typed_error() {
    let Some(text) = run_under_stub("stub_without_an_entry_point", &["STUB_WITHOUT_NAME"]) else {
        return;
    };
    assert!(
        text.contains("stub: missing entry point reported"),
        "{text}"
    );
}

#[test]
#[ignore = "run by a_driver_without_an_entry_point_is_a_typed_error under the stand-in"]
fn stub_without_an_entry_point() {
    match CudaDevice::open(0) {
        Err(
            e @ CudaError::DriverPanicked {
                call: "cuDeviceGetName",
                ..
            },
        ) => {
            assert!(e.to_string().contains("update the NVIDIA driver"), "{e}");
            println!("stub: missing entry point reported: {e}");
        }
        other => {
            println!("stub_without_an_entry_point: skipped, not under the stand-in: {other:?}")
        }
    }
}

#[test]
fn a_driver_without_devices_is_no_device() {
    let Some(text) = run_under_stub("stub_without_devices", &["STUB_NO_DEVICE"]) else {
        return;
    };
    assert!(text.contains("stub: no device reported"), "{text}");
}

#[test]
#[ignore = "run by a_driver_without_devices_is_no_device under the stand-in"]
fn stub_without_devices() {
    match CudaDevice::open(0) {
        Err(
            e @ CudaError::NoDevice {
                ordinal: 0,
                count: 0,
            },
        ) => {
            println!("stub: no device reported: {e}");
        }
        other => println!("stub_without_devices: skipped, not under the stand-in: {other:?}"),
    }
}

/// The kernel of `cuda_support` built under the stand-in, with a fresh cubin cache, or
/// `None` (after saying so) without NVRTC.
fn stub_kernel(test: &str) -> Option<(CudaKernel, tempfile::TempDir)> {
    let settings = Settings::from_env();
    if let Err(e) = Nvrtc::load(&settings) {
        if settings.nvrtc.is_some() {
            panic!("{e}");
        }
        println!("{test}: skipped, no NVRTC: {e}");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        cache_dir: Some(dir.path().to_path_buf()),
        ..settings
    };
    let kernel = CudaKernel::build(
        program(),
        gpu_func(),
        SPMV_CU.to_string(),
        plan(),
        &settings,
    )
    .unwrap();
    Some((kernel, dir))
}

fn f32_values(t: &SparseTensor<'_>) -> Vec<f32> {
    match &t.values {
        Values::F32(v) => v.to_vec(),
        other => panic!("f32 values expected, got {}", other.dtype()),
    }
}

/// `y` (m values) downloaded from `buffer`, as outputs to compare with the interpreter.
fn y_outputs(device: &CudaDevice, buffer: &DeviceBuffer, m: usize) -> Outputs {
    let mut y = vec![0.0f32; m];
    device.download(buffer, &mut y).unwrap();
    Outputs::from([(
        "y".to_string(),
        SparseTensor {
            structure: Arc::new(dense_structure(&[m])),
            values: Values::F32(Cow::Owned(y)),
        },
    )])
}

fn array_of(buffer: &DeviceBuffer, dtype: DType, shape: Vec<usize>) -> DeviceArray {
    DeviceArray::contiguous(buffer.device_ptr(), dtype, shape, 0)
}

#[test]
fn the_device_operand_path_runs_against_a_stand_in_driver() {
    let Some(text) = run_under_stub("stub_device_operands", &[]) else {
        return;
    };
    let settings = Settings::from_env();
    if settings.nvrtc.is_some() || Nvrtc::load(&settings).is_ok() {
        assert!(
            text.contains("stub: device operand checks passed"),
            "{text}"
        );
    } else {
        println!("the device operand checks were skipped: no NVRTC");
    }
}

#[test]
#[ignore = "run by the_device_operand_path_runs_against_a_stand_in_driver under the stand-in"]
fn stub_device_operands() {
    let Some(device) = stub_device("stub_device_operands") else {
        return;
    };
    let Some((kernel, _cache)) = stub_kernel("stub_device_operands") else {
        return;
    };
    let stub = Stub::open();
    let stream = device.create_stream().unwrap();
    let s = stream.stream();
    assert_ne!(s, CudaStream::DEFAULT);
    assert_eq!(stub.count(9), 1, "one stream made");
    let (m, n) = (300, 70);
    let host = inputs(1, m, n);
    let a = host["A"].clone();
    let nnz = a.values.len();
    let x_dev = device.upload(&f32_values(&host["x"])).unwrap();
    let a_values_dev = device.upload(&f32_values(&a)).unwrap();
    // Garbage where y goes: the run must clear it.
    let y_dev = device.upload(&vec![9.0f32; m]).unwrap();
    let baseline = stub.live().0;
    let options = KernelOptions::default();
    let mut asked = Vec::new();
    let mut alloc = |spec: &OutputSpec| {
        asked.push((spec.name.clone(), spec.shape.clone(), spec.dtype));
        Ok(array_of(&y_dev, spec.dtype, spec.shape.clone()))
    };
    let x = || DeviceInput::dense(array_of(&x_dev, DType::F32, vec![n]));

    // 1. A in host memory: its structure arrays are copied once and cached, its values
    // on every run, and the run waits for the stream before returning (host memory).
    stub.clear();
    let with_host_a = HashMap::from([
        ("A".to_string(), DeviceInput::host(a.clone())),
        ("x".to_string(), x()),
    ]);
    let out = kernel
        .run_device(&with_host_a, &mut alloc, s, &options)
        .unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out["y"].array.ptr, y_dev.device_ptr());
    assert_eq!(*out["y"].structure, dense_structure(&[m]));
    let (htod, htod_bytes, dtoh, stream_waits, _) = stub.copies();
    assert_eq!(htod, 3, "indptr, indices and A's values; never x");
    assert_eq!(htod_bytes as usize, (m + 1) * 4 + nnz * 4 + nnz * 4);
    assert_eq!(dtoh, 0);
    assert_eq!(
        stream_waits, 3,
        "each cached array once, and the run (host values)"
    );
    assert_eq!(operand_cache::stats(), (1, 2, (m + 1) * 4 + nnz * 4));
    let log = stub.log();
    let rows = m.div_ceil(128);
    let stores = m.div_ceil(256);
    assert!(
        log.contains(&format!(
            "spmv_rows {rows} 1 1 128 1 1 0 s1\nspmv_store {stores} 1 1 256 1 1 0 s1\n"
        )),
        "{log}"
    );
    assert!(
        !log.contains("spmv_never"),
        "an empty grid is skipped: {log}"
    );
    assert_matches_interpreter(&y_outputs(&device, &y_dev, m), &host);

    // 2. A's values in device memory too: nothing is copied, nothing waited for; the
    // output is cleared and the scratch buffer made and freed, all on the stream.
    stub.clear();
    let on_device = HashMap::from([
        (
            "A".to_string(),
            DeviceInput::with_device_values(
                Arc::clone(&a.structure),
                array_of(&a_values_dev, DType::F32, vec![nnz]),
            ),
        ),
        ("x".to_string(), x()),
    ]);
    kernel
        .run_device(&on_device, &mut alloc, s, &options)
        .unwrap();
    assert_eq!(stub.copies(), (0, 0, 0, 0, 0), "no copy, no wait");
    assert_eq!(
        stub.log(),
        format!(
            "allocAsync {p} s1\nmemsetAsync {p} s1\nmemsetAsync {p} s1\n\
             spmv_rows {rows} 1 1 128 1 1 0 s1\nspmv_store {stores} 1 1 256 1 1 0 s1\nfreeAsync s1\n",
            p = m * 4
        )
    );
    assert_eq!(
        stub.live().0,
        baseline + 2,
        "the scratch buffer is freed; the cached arrays stay"
    );
    stream.synchronize().unwrap();
    assert_matches_interpreter(&y_outputs(&device, &y_dev, m), &host);
    assert_eq!(
        asked,
        vec![("y".to_string(), vec![m], DType::F32); 2],
        "alloc is asked once per run"
    );

    // 3. Operands the kernel cannot use are refused before anything is queued.
    let with_x = |x: DeviceArray| {
        HashMap::from([
            ("A".to_string(), on_device["A"].clone()),
            ("x".to_string(), DeviceInput::dense(x)),
        ])
    };
    let run = |inputs: &HashMap<String, DeviceInput<'_>>| {
        stub.clear();
        let mut alloc = |spec: &OutputSpec| Ok(array_of(&y_dev, spec.dtype, spec.shape.clone()));
        let err = kernel
            .run_device(inputs, &mut alloc, s, &options)
            .unwrap_err();
        assert_eq!(stub.log(), "", "nothing queued for {err}");
        assert_eq!(stub.copies().0, 0, "nothing copied for {err}");
        err
    };
    let x_array = array_of(&x_dev, DType::F32, vec![n]);
    let err = run(&with_x(DeviceArray {
        dtype: DType::F64,
        ..x_array.clone()
    }));
    assert!(
        matches!(&err, CudaError::OperandDType { operand, expected, found } if operand == "x" && expected == "f32" && found == "f64"),
        "{err:?}"
    );
    let x_matrix = |shape: Vec<usize>, strides: Vec<i64>| DeviceArray {
        shape,
        strides: Some(strides),
        ..x_array.clone()
    };
    // A column of a wider matrix is not contiguous; a row of one is.
    let err = run(&with_x(x_matrix(vec![n], vec![2])));
    assert!(
        matches!(&err, CudaError::NotContiguous { operand, .. } if operand == "x"),
        "{err:?}"
    );
    assert!(err.to_string().contains("contiguous()"), "{err}");
    stub.clear();
    let mut alloc_y = |spec: &OutputSpec| Ok(array_of(&y_dev, spec.dtype, spec.shape.clone()));
    kernel
        .run_device(
            &with_x(x_matrix(vec![n], vec![1])),
            &mut alloc_y,
            s,
            &options,
        )
        .unwrap();
    let err = run(&with_x(DeviceArray {
        device: 1,
        ..x_array.clone()
    }));
    assert!(
        matches!(
            err,
            CudaError::WrongDevice {
                found: 1,
                expected: 0,
                ..
            }
        ),
        "{err:?}"
    );
    let elsewhere = stub.alloc_foreign(n * 4, 1, false, false);
    let err = run(&with_x(DeviceArray {
        ptr: elsewhere,
        ..x_array.clone()
    }));
    assert!(
        matches!(
            err,
            CudaError::WrongDevice {
                found: 1,
                expected: 0,
                ..
            }
        ),
        "the driver's ordinal, not the caller's claim: {err:?}"
    );
    stub.free_foreign(elsewhere);
    let pinned = stub.alloc_foreign(n * 4, 0, true, false);
    let err = run(&with_x(DeviceArray {
        ptr: pinned,
        ..x_array.clone()
    }));
    assert!(
        matches!(&err, CudaError::NotDeviceMemory { reason, .. } if reason.contains("host memory")),
        "{err:?}"
    );
    stub.free_foreign(pinned);
    let other_context = stub.alloc_foreign(n * 4, 0, false, true);
    let err = run(&with_x(DeviceArray {
        ptr: other_context,
        ..x_array.clone()
    }));
    assert!(
        matches!(&err, CudaError::NotDeviceMemory { reason, .. } if reason.contains("another CUDA context")),
        "{err:?}"
    );
    stub.free_foreign(other_context);
    let host_x = f32_values(&host["x"]);
    let err = run(&with_x(DeviceArray {
        ptr: host_x.as_ptr() as u64,
        ..x_array.clone()
    }));
    assert!(
        matches!(&err, CudaError::NotDeviceMemory { operand, reason } if operand == "x" && reason.contains("first byte")),
        "{err:?}"
    );
    // A shape that claims more than was allocated.
    let short = device.upload(&vec![1.0f32; n - 1]).unwrap();
    let err = run(&with_x(array_of(&short, DType::F32, vec![n])));
    assert!(
        matches!(&err, CudaError::NotDeviceMemory { reason, .. } if reason.contains("last byte")),
        "{err:?}"
    );
    let err = run(&with_x(DeviceArray {
        ptr: x_dev.device_ptr() + 2,
        ..x_array.clone()
    }));
    assert!(
        matches!(&err, CudaError::NotDeviceMemory { reason, .. } if reason.contains("not aligned")),
        "{err:?}"
    );
    // A shape that does not fit A is the binding's error.
    let err = run(&with_x(array_of(&x_dev, DType::F32, vec![n - 1])));
    assert!(matches!(err, CudaError::Kernel(_)), "{err:?}");
    let err = run(&HashMap::from([
        ("A".to_string(), on_device["A"].clone()),
        ("x".to_string(), x()),
        ("z".to_string(), x()),
    ]));
    assert!(matches!(err, CudaError::Kernel(_)), "{err:?}");
    assert!(err.to_string().contains('z'), "{err}");
    // A's values: their count must be A's.
    let err = run(&HashMap::from([
        (
            "A".to_string(),
            DeviceInput::with_device_values(
                Arc::clone(&a.structure),
                array_of(&a_values_dev, DType::F32, vec![nnz - 1]),
            ),
        ),
        ("x".to_string(), x()),
    ]));
    assert!(matches!(err, CudaError::Kernel(_)), "{err:?}");

    // Outputs: the wrong size, the wrong type, or no memory at all.
    let refuse = |alloc: &mut dyn FnMut(&OutputSpec) -> Result<DeviceArray, String>| {
        stub.clear();
        let err = kernel
            .run_device(&on_device, alloc, s, &options)
            .unwrap_err();
        assert_eq!(stub.log(), "", "nothing queued for {err}");
        err
    };
    let err = refuse(&mut |_| Ok(array_of(&y_dev, DType::F32, vec![m - 1])));
    assert!(
        matches!(&err, CudaError::OperandSize { operand, .. } if operand == "y"),
        "{err:?}"
    );
    let err = refuse(&mut |spec| Ok(array_of(&y_dev, DType::F64, spec.shape.clone())));
    assert!(matches!(&err, CudaError::OperandDType { .. }), "{err:?}");
    let err = refuse(&mut |_| Err("out of memory".to_string()));
    assert!(
        matches!(&err, CudaError::OutputAllocation { output, reason } if output == "y" && reason == "out of memory"),
        "{err:?}"
    );

    // 4. A new matrix is never served the arrays of one that died, even at the same
    // address: the old entry goes (after a wait for the device) and the new one is
    // copied.
    let x_tensor = host["x"].clone();
    drop((with_host_a, on_device, a, host));
    // Another matrix, the same x (x_dev holds it).
    let mut host = inputs(2, m, n);
    host.insert("x".to_string(), x_tensor);
    stub.clear();
    let fresh = HashMap::from([
        ("A".to_string(), DeviceInput::host(host["A"].clone())),
        ("x".to_string(), x()),
    ]);
    let mut alloc_y = |spec: &OutputSpec| Ok(array_of(&y_dev, spec.dtype, spec.shape.clone()));
    kernel
        .run_device(&fresh, &mut alloc_y, s, &options)
        .unwrap();
    let (htod, _, _, _, context_waits) = stub.copies();
    assert_eq!(htod, 3, "the new structure's arrays and values");
    assert_eq!(
        context_waits, 1,
        "freeing the dead entry waited for the device"
    );
    assert_eq!(
        operand_cache::stats().0,
        1,
        "only the live structure is cached"
    );
    assert_matches_interpreter(&y_outputs(&device, &y_dev, m), &host);

    // 5. A structure over borrowed arrays is copied on every run, never cached.
    let owned_structure = &host["A"].structure;
    let borrowed = Arc::new(Structure {
        format: owned_structure.format.clone(),
        shape: owned_structure.shape.clone(),
        axes: owned_structure.axes.iter().map(AxisStorage::view).collect(),
    });
    for _ in 0..2 {
        stub.clear();
        let inputs = HashMap::from([
            (
                "A".to_string(),
                DeviceInput {
                    structure: Arc::clone(&borrowed),
                    values: DeviceValues::Host(host["A"].values.view()),
                },
            ),
            ("x".to_string(), x()),
        ]);
        kernel
            .run_device(&inputs, &mut alloc_y, s, &options)
            .unwrap();
        assert_eq!(stub.copies().0, 3, "indptr, indices and values, every run");
        assert_eq!(operand_cache::stats().0, 1);
    }
    assert_matches_interpreter(&y_outputs(&device, &y_dev, m), &host);

    // 6. Clearing the cache frees its arrays; the stream goes with its handle.
    drop(fresh);
    operand_cache::clear();
    assert_eq!(operand_cache::stats(), (0, 0, 0));
    drop((short, x_dev, a_values_dev, y_dev));
    assert_eq!(stub.live().0, 0, "every allocation freed");
    drop(stream);
    assert_eq!(stub.count(9), 0, "the stream is destroyed");
    println!("stub: device operand checks passed");
}

#[test]
fn without_stream_ordered_memory_a_run_waits_for_its_stream() {
    let Some(text) = run_under_stub("stub_without_stream_ordered_memory", &["STUB_NO_MEMPOOL"])
    else {
        return;
    };
    let settings = Settings::from_env();
    if settings.nvrtc.is_some() || Nvrtc::load(&settings).is_ok() {
        assert!(text.contains("stub: fallback checks passed"), "{text}");
    }
}

#[test]
#[ignore = "run by without_stream_ordered_memory_a_run_waits_for_its_stream under the stand-in"]
fn stub_without_stream_ordered_memory() {
    let Some(device) = stub_device("stub_without_stream_ordered_memory") else {
        return;
    };
    let Some((kernel, _cache)) = stub_kernel("stub_without_stream_ordered_memory") else {
        return;
    };
    let stub = Stub::open();
    let stream = device.create_stream().unwrap();
    let (m, n) = (129, 40);
    let host = inputs(3, m, n);
    let a = &host["A"];
    let x_dev = device.upload(&f32_values(&host["x"])).unwrap();
    let a_values_dev = device.upload(&f32_values(a)).unwrap();
    let y_dev = device.alloc_zeroed(m * 4).unwrap();
    let inputs = HashMap::from([
        (
            "A".to_string(),
            DeviceInput::with_device_values(
                Arc::clone(&a.structure),
                array_of(&a_values_dev, DType::F32, vec![a.values.len()]),
            ),
        ),
        (
            "x".to_string(),
            DeviceInput::dense(array_of(&x_dev, DType::F32, vec![n])),
        ),
    ]);
    let mut alloc = |spec: &OutputSpec| Ok(array_of(&y_dev, spec.dtype, spec.shape.clone()));
    kernel
        .run_device(
            &inputs,
            &mut alloc,
            stream.stream(),
            &KernelOptions::default(),
        )
        .unwrap();
    let live = stub.live().0;
    stub.clear();
    kernel
        .run_device(
            &inputs,
            &mut alloc,
            stream.stream(),
            &KernelOptions::default(),
        )
        .unwrap();
    let (htod, _, _, stream_waits, _) = stub.copies();
    assert_eq!(htod, 0);
    assert_eq!(
        stream_waits, 1,
        "plain run memory: the run waits before freeing it"
    );
    assert!(!stub.log().contains("allocAsync"), "{}", stub.log());
    assert_eq!(stub.live().0, live, "the scratch buffer is freed");
    assert_matches_interpreter(&y_outputs(&device, &y_dev, m), &host);
    operand_cache::clear();
    println!("stub: fallback checks passed");
}
