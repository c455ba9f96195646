/* LD_PRELOAD this library and a program sees an AVX2 CPU without AVX-512, VNNI or AMX (x86-64-v3, as most
 * laptops and cloud machines): numpy, onnxruntime's MLAS and ge pick the kernels they would pick there, and
 * run them on this CPU at its speed. Built and used by tests/platforms/avx2_cpu.py (read it first).
 *
 * How: Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, /proc/cpuinfo flag "cpuid_fault") makes every CPUID
 * instruction of this process raise SIGSEGV; the handler runs the instruction with faulting off for a moment,
 * clears the later features' bits and steps over it. Threads inherit the setting; exec clears it, and the
 * child's copy of this library (LD_PRELOAD is in its environment) sets it again. Feature checks made before
 * this library's constructor (the dynamic loader's, glibc's string functions) see the real CPU: avx2_cpu.py
 * takes the same features from glibc by its tunables (GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,...). The
 * program's own SIGSEGV handlers (Python's faulthandler, as pytest installs it) are kept and chained.
 * /proc/cpuinfo, where ge and others read the features Linux names, is opened as a copy without them. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction;
static struct sigaction program_segv;  /* what the program asked for SIGSEGV; ours stays installed */

static int allow_cpuid(int allow) { return (int)syscall(SYS_arch_prctl, ARCH_SET_CPUID, allow); }

#define BIT(n) (1u << (n))
/* Features an AVX2 (Haswell..Coffee Lake, Zen 1-3) CPU lacks, by CPUID leaf 7 sub-leaf and register. */
static void clear_later_features(unsigned leaf, unsigned sub, unsigned *a, unsigned *b, unsigned *c, unsigned *d) {
    if (leaf == 7 && sub == 0) {
        /* AVX512 F, DQ, IFMA, PF, ER, CD, BW, VL */
        *b &= ~(BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31));
        /* AVX512 VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ */
        *c &= ~(BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14));
        /* AVX512 4VNNIW, 4FMAPS, VP2INTERSECT, FP16; AMX BF16, TILE, INT8 */
        *d &= ~(BIT(2) | BIT(3) | BIT(8) | BIT(23) | BIT(22) | BIT(24) | BIT(25));
    } else if (leaf == 7 && sub == 1) {
        *a &= ~(BIT(4) | BIT(5) | BIT(21) | BIT(23));       /* AVX-VNNI, AVX512 BF16, AMX FP16, AVX-IFMA */
        *d &= ~(BIT(4) | BIT(5) | BIT(10) | BIT(19));       /* AVX-VNNI-INT8, AVX-NE-CONVERT, -INT16, AVX10 */
    } else if (leaf == 0x24) {
        *a = *b = *c = *d = 0;                              /* AVX10's leaf */
    }
}

static void on_segv(int sig, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *reg = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)reg[REG_RIP];
    if (info->si_code == SI_KERNEL && ip[0] == 0x0f && ip[1] == 0xa2) {  /* a faulting CPUID */
        unsigned leaf = (unsigned)reg[REG_RAX], sub = (unsigned)reg[REG_RCX], a, b, c, d;
        allow_cpuid(1);
        __cpuid_count(leaf, sub, a, b, c, d);
        allow_cpuid(0);
        clear_later_features(leaf, sub, &a, &b, &c, &d);
        reg[REG_RAX] = a, reg[REG_RBX] = b, reg[REG_RCX] = c, reg[REG_RDX] = d;
        reg[REG_RIP] += 2;
        return;
    }
    if (program_segv.sa_flags & SA_SIGINFO && program_segv.sa_sigaction) {
        program_segv.sa_sigaction(sig, info, context);
    } else if (program_segv.sa_handler != SIG_DFL && program_segv.sa_handler != SIG_IGN) {
        program_segv.sa_handler(sig);
    } else {  /* a real fault: die of it as the program would have */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        real_sigaction(SIGSEGV, &dfl, NULL);
        if (info->si_code != SI_KERNEL && info->si_code <= 0) raise(sig);  /* sent, not a fault: send again */
    }
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (!real_sigaction) real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (sig != SIGSEGV) return real_sigaction(sig, act, old);
    if (old) *old = program_segv;
    if (act) program_segv = *act;
    return 0;
}

/* /proc/cpuinfo without the flags of the features cleared above, as a memfd reopened at every open */
static int cpuinfo_copy = -1;
static const char *const later_flags[] = {"avx512", "avx_vnni", "amx", "avx10", "avx_ifma", "avx_ne_convert", NULL};

static int is_later_flag(const char *word, size_t n) {
    for (const char *const *p = later_flags; *p; p++)
        if (n >= strlen(*p) && strncmp(word, *p, strlen(*p)) == 0) return 1;
    return 0;
}

static void copy_cpuinfo(void) {
    int in = (int)syscall(SYS_openat, AT_FDCWD, "/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
    if (in < 0) return;
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    for (ssize_t got; text && (got = read(in, text + len, cap - len)) > 0;)
        if ((len += (size_t)got) == cap) text = realloc(text, cap *= 2);
    close(in);
    int out = text ? memfd_create("cpuinfo", MFD_CLOEXEC) : -1;
    for (size_t line = 0; out >= 0 && line < len;) {
        size_t end = line;
        while (end < len && text[end] != '\n') end++;
        int flags_line = strncmp(text + line, "flags", 5) == 0;
        for (size_t w = line; w < end;) {  /* words and the spaces before them */
            size_t start = w;
            while (w < end && (text[w] == ' ' || text[w] == '\t')) w++;
            size_t word = w;
            while (w < end && text[w] != ' ' && text[w] != '\t') w++;
            if (!(flags_line && is_later_flag(text + word, w - word)) && write(out, text + start, w - start) < 0) {}
        }
        if (write(out, "\n", 1) < 0) {}
        line = end + 1;
    }
    free(text);
    cpuinfo_copy = out;
}

static int reopen_cpuinfo(const char *path, int flags) {
    if (cpuinfo_copy < 0 || strcmp(path, "/proc/cpuinfo") != 0) return -2;
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", cpuinfo_copy);
    return (int)syscall(SYS_openat, AT_FDCWD, self, flags & ~(O_WRONLY | O_RDWR | O_CREAT | O_TRUNC));
}

#define OPEN_WRAPPER(name, ...)                                                              \
    int name(__VA_ARGS__, int flags, ...) {                                                  \
        va_list ap;                                                                          \
        va_start(ap, flags);                                                                 \
        mode_t mode = (flags & O_CREAT || (flags & O_TMPFILE) == O_TMPFILE) ? va_arg(ap, mode_t) : 0;         \
        va_end(ap);                                                                          \
        int fd = reopen_cpuinfo(path, flags);                                                \
        return fd != -2 ? fd : (int)syscall(SYS_openat, OPEN_AT, path, flags, mode);         \
    }
#define OPEN_AT AT_FDCWD
OPEN_WRAPPER(open, const char *path)
OPEN_WRAPPER(open64, const char *path)
#undef OPEN_AT
#define OPEN_AT dirfd
OPEN_WRAPPER(openat, int dirfd, const char *path)
OPEN_WRAPPER(openat64, int dirfd, const char *path)

/* glibc's signal() installs through its own __sigaction, not the exported sigaction above (gcc's cc1 does so,
 * then GMP inside it runs CPUID) */
static sighandler_t install(int sig, sighandler_t handler, int flags) {
    struct sigaction act = {.sa_handler = handler, .sa_flags = flags}, old;
    sigemptyset(&act.sa_mask);
    return sigaction(sig, &act, &old) == 0 ? old.sa_handler : SIG_ERR;
}
sighandler_t signal(int sig, sighandler_t handler) { return install(sig, handler, SA_RESTART); }
sighandler_t bsd_signal(int sig, sighandler_t handler) { return install(sig, handler, SA_RESTART); }
sighandler_t sysv_signal(int sig, sighandler_t handler) { return install(sig, handler, SA_RESETHAND | SA_NODEFER); }

__attribute__((constructor)) static void start_masking(void) {
    copy_cpuinfo();
    real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_segv;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    program_segv.sa_handler = SIG_DFL;
    if (real_sigaction(SIGSEGV, &ours, NULL) != 0 || allow_cpuid(0) != 0) {
        /* never measure the real CPU while saying it is an AVX2 one */
        static const char msg[] = "avx2_cpuid: this kernel or CPU has no CPUID faulting (cpuid_fault)\n";
        if (write(2, msg, sizeof msg - 1) < 0) {}
        _exit(97);
    }
}
