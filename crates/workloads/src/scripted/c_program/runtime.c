/*
 * tierlab scripted-workload runtime: the part of every generated program that does not depend
 * on the scenario. The generated tables (REGIONS, PHASES, STEPS, ...) follow this text in the
 * same file. C11 + POSIX + Linux syscalls; libc and pthreads only.
 *
 * Output: JSON lines on stdout (see the module doc of tierlab's scripted::c_program).
 * Environment: TIERLAB_FILE_DIR (where file regions are created, default /tmp);
 * TIERLAB_RESIDENCY=mincore (presence only, from /proc/PID/pagemap, as when the kernel has no NUMA).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef MPOL_MF_MOVE
#define MPOL_MF_MOVE (1 << 1)
#endif

#define PAGE 4096ULL
/* Pages per move_pages(2) call. */
#define CHUNK 4096
/* Nodes a residency sample can report. */
#define MAXNODES 64
/* Paced accesses are batched so that each sleep is at least this long. */
#define MIN_SLEEP_NS 50000ULL
/* `mix` salt of a forked child's random numbers (the simulator's CHILD_SALT). */
#define CHILD_SALT 0x63686c64ULL

/* ---- the generated tables (defined after this runtime) ---- */

/* A region: mapped at `start` by main before the threads start. */
struct region {
	const char *name; /* a JSON string, quotes included */
	uint64_t start, pages;
	int prot;         /* PROT_* bits (tierlab's prot bits have the same values) */
	int file;         /* index into the files (fds), -1 for anonymous memory */
};

/* A watched sub-range of a region, reported like a region. */
struct watch {
	const char *name;
	int region;
	uint64_t offset, pages;
};

enum kind {
	K_NOTHING,
	K_ACCESS,
	K_MMAP,
	K_MUNMAP,
	K_MPROTECT,
	K_MADVISE,
	K_MOVE,
	K_SLEEP,
	K_FORK,
	K_WAIT
};
enum pattern { P_SEQ, P_REV, P_PERM, P_STRIDE, P_UNIFORM, P_ZIPF };
enum writes { W_NEVER, W_ALWAYS, W_FRACTION };

struct phase {
	const char *name; /* a JSON string */
	int kind;
	const unsigned char *participants; /* one flag per thread */
	int lead;                          /* lowest participant: does the region binding */
	uint64_t addr, len;                /* the range (region kinds) */
	int prot;                          /* K_MMAP, K_MPROTECT */
	int advice;                        /* K_MADVISE */
	int node;                          /* K_MOVE */
	int file;                          /* K_MMAP: file index or -1 */
	uint64_t pgoff;                    /* K_MMAP of a file */
	uint64_t sleep_ns;                 /* K_SLEEP */
	const int *child;                  /* K_FORK: the phases each child runs */
	int nchild;
	/* K_ACCESS */
	int pattern;
	uint64_t pages, count, stride; /* count: accesses; K_FORK: children per thread */
	double zipf_s;
	int hot_last;
	int writes;
	double write_fraction;
	uint64_t pace_ns; /* 0: not paced */
	const uint32_t *gap; /* per thread: spin iterations between accesses (gap_cycles); NULL: none */
	double duration_ms; /* < 0: run `count` accesses; else stop on the clock */
	uint64_t perm_seed;
	/* Region binding: after the phase, `lead` moves [bind_addr, +bind_len) to bind_node. */
	int bind_node; /* -1: none */
	uint64_t bind_addr, bind_len;
};

struct step {
	const int *members;
	int nmembers;
	uint64_t times;
};

extern const struct region REGIONS[];
extern const int NREGIONS;
extern const int NFILES;
extern const int FILE_SHMEM[]; /* per file: a memfd (shmem), not a file in TIERLAB_FILE_DIR */
extern const struct watch WATCHES[];
extern const int NWATCHES;
extern const struct phase PHASES[];
extern const int NPHASES;
extern const struct step STEPS[];
extern const int NSTEPS;
extern const uint64_t LOOPS;
extern const int NTHREADS;
extern const int PLACEMENT[]; /* CPU per thread, -1: not pinned */
extern const uint64_t SEED;
extern const double SAMPLE_MS;
extern const char *const COUNTERS[];
extern const int NCOUNTERS;
extern const char *const END_COUNTERS[];
extern const int NEND_COUNTERS;
#ifdef TIERLAB_NODE_MEMINFO
extern const char *const NODE_MEMINFO[];
extern const int NNODE_MEMINFO;
#endif
extern const int NNODES;

/* ---- output ---- */

static uint64_t t0_ns;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static double ms_since_start(uint64_t t)
{
	return (double)(t - t0_ns) / 1e6;
}

/*
 * The scheduler tick's next expiry, absolute CLOCK_MONOTONIC ns, from /proc/timer_list
 * (kernel/time/timer_list.c: each CPU's active hrtimers, its tick as tick_nohz_handler,
 * tick_sched_timer before 6.9, then "# expires at SOFT-HARD nsecs"); 0 if unreadable (not
 * root). Every CPU ticks on the same jiffies, so one tick gives where they lie against t0.
 */
static long long next_tick_expiry(void)
{
	FILE *f = fopen("/proc/timer_list", "r");
	if (!f)
		return 0;
	char line[256];
	long long expiry = 0;
	int tick = 0;
	while (fgets(line, sizeof line, f)) {
		if (tick) {
			if (sscanf(line, " # expires at %lld", &expiry) != 1)
				expiry = 0;
			break;
		}
		tick = strstr(line, "tick_nohz_handler") || strstr(line, "tick_sched_timer");
	}
	fclose(f);
	return expiry;
}

/* A growable string. */
struct sb {
	char *s;
	size_t len, cap;
};

static void sb_printf(struct sb *b, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = b->cap - b->len;
		int n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap * 2 + (size_t)n + 64;
		char *s = realloc(b->s, cap);
		if (!s)
			abort();
		b->s = s;
		b->cap = cap;
	}
}

/* `s` as the inside of a JSON string. */
static void sb_json_str(struct sb *b, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			sb_printf(b, "\\%c", c);
		else if (c < 0x20)
			sb_printf(b, "\\u%04x", c);
		else
			sb_printf(b, "%c", c);
	}
}

/* Print one line (and flush: a harness reads the lines as they come). */
/* The sampler process, from the workload's side (0: none, or this is the sampler). */
static pid_t sampler_child;

/* One write(2) per line: the sampler process writes to the same stdout. */
/* The guest's ftrace marker (TIERLAB_TRACE_MARKER, set by tierlab validate's /init when it
 * traces): a line there names the writing thread and, from main, the program's t0, so the
 * trace's timestamps (trace_clock mono) line up with the samples'. -1 when not tracing. */
static int trace_marker_fd = -1;

static void trace_mark(const char *what)
{
	if (trace_marker_fd >= 0) {
		ssize_t r = write(trace_marker_fd, what, strlen(what));
		(void)r;
	}
}

static void emit(const char *line)
{
	pthread_mutex_lock(&out_lock);
	struct iovec iov[2] = {{.iov_base = (void *)line, .iov_len = strlen(line)},
			       {.iov_base = (void *)"\n", .iov_len = 1}};
	ssize_t r = writev(1, iov, 2);
	(void)r;
	pthread_mutex_unlock(&out_lock);
}

/* out_lock across fork(2): a forked child may print, and must not find the lock held by a
 * thread it does not have. */
static void out_lock_take(void)
{
	pthread_mutex_lock(&out_lock);
}

static void out_lock_drop(void)
{
	pthread_mutex_unlock(&out_lock);
}

/* Print {"key":"message"}; `fatal` exits 1 with the output lock held, so nothing follows (the
 * sampler is stopped first, so that none of its lines follows either). */
static void report(const char *key, int fatal, const char *fmt, va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof msg, fmt, ap);
	struct sb b = {0};
	sb_printf(&b, "{\"%s\":\"", key);
	sb_json_str(&b, msg);
	sb_printf(&b, "\"}");
	if (!fatal) {
		emit(b.s);
		free(b.s);
		return;
	}
	pthread_mutex_lock(&out_lock);
	if (sampler_child > 0) {
		kill(sampler_child, SIGKILL);
		waitpid(sampler_child, NULL, 0);
	}
	struct iovec iov[2] = {{.iov_base = b.s, .iov_len = strlen(b.s)},
			       {.iov_base = (void *)"\n", .iov_len = 1}};
	ssize_t r = writev(1, iov, 2);
	(void)r;
	_exit(1);
}

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	report("error", 1, fmt, ap);
	va_end(ap);
	_exit(1);
}

__attribute__((format(printf, 2, 3))) static void warn_once(atomic_int *done, const char *fmt, ...)
{
	if (atomic_exchange(done, 1))
		return;
	va_list ap;
	va_start(ap, fmt);
	report("warning", 0, fmt, ap);
	va_end(ap);
}

/* An access to a page the program has no right to (mprotect, munmap): the simulator stops
 * the run with an error, so does the program. Async-signal-safe. */
static void on_fault(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	char line[96] = "{\"error\":\"";
	size_t n = strlen(line);
	const char *what = sig == SIGSEGV ? "SIGSEGV at 0x" : "SIGBUS at 0x";
	for (const char *w = what; *w; w++)
		line[n++] = *w;
	uintptr_t a = (uintptr_t)si->si_addr;
	char hex[2 * sizeof a];
	int k = 0;
	do {
		hex[k++] = "0123456789abcdef"[a & 15];
		a >>= 4;
	} while (a && k < (int)sizeof hex);
	while (k)
		line[n++] = hex[--k];
	line[n++] = '"';
	line[n++] = '}';
	line[n++] = '\n';
	/* Stop the sampler first (kill and waitpid are async-signal-safe), so the error is last. */
	if (sampler_child > 0) {
		kill(sampler_child, SIGKILL);
		waitpid(sampler_child, NULL, 0);
	}
	ssize_t w = write(STDOUT_FILENO, line, n);
	(void)w;
	_exit(1);
}

/* ---- random numbers: SplitMix64, as the simulator's seed mixing ---- */

static uint64_t splitmix(uint64_t z)
{
	z += 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t mix(uint64_t seed, uint64_t salt, uint64_t n)
{
	return splitmix(splitmix(seed ^ salt) + n);
}

struct rng {
	uint64_t s;
};

static inline uint64_t rng_next(struct rng *r)
{
	r->s += 0x9E3779B97F4A7C15ULL;
	uint64_t z = r->s;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
#ifdef __SIZEOF_INT128__
	__extension__ typedef unsigned __int128 u128;
	return (uint64_t)(((u128)rng_next(r) * n) >> 64);
#else
	return rng_next(r) % n;
#endif
}

/* Uniform in [0, 1). */
static inline double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* ---- x^-s without libm (the program links with libc and pthreads only) ---- */

static double bits_to_double(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof d);
	return d;
}

/* Natural logarithm of a normal x > 0: x = m 2^e, m in [sqrt(1/2), sqrt(2)), atanh series. */
static double ln(double x)
{
	uint64_t u;
	memcpy(&u, &x, sizeof u);
	int e = (int)((u >> 52) & 0x7ff) - 1023;
	double m = bits_to_double((u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
	if (m > 1.4142135623730951) {
		m /= 2.0;
		e++;
	}
	double z = (m - 1.0) / (m + 1.0), z2 = z * z, term = z, sum = 0.0;
	for (int k = 1; k < 40; k += 2) {
		sum += term / k;
		term *= z2;
	}
	return 2.0 * sum + e * 0.6931471805599453;
}

/* e^y: y = k ln2 + r with |r| <= ln2 / 2, Taylor series for e^r, 2^k by the exponent bits. */
static double expo(double y)
{
	if (y < -744.0)
		return 0.0;
	if (y > 709.0)
		return bits_to_double(0x7ff0000000000000ULL);
	double kf = y / 0.6931471805599453;
	long k = (long)(kf < 0 ? kf - 0.5 : kf + 0.5);
	double r = y - (double)k * 0.6931471805599453, term = 1.0, sum = 1.0;
	for (int n = 1; n < 30; n++) {
		term *= r / n;
		sum += term;
	}
	/* Scale in two steps so that 2^k stays a normal double. */
	while (k < -1000) {
		sum *= bits_to_double((uint64_t)(1023 - 1000) << 52);
		k += 1000;
	}
	while (k > 1000) {
		sum *= bits_to_double((uint64_t)(1023 + 1000) << 52);
		k -= 1000;
	}
	return sum * bits_to_double((uint64_t)(1023 + k) << 52);
}

/* x^-s for x >= 1. */
static double pow_neg(double x, double s)
{
	return expo(-s * ln(x));
}

/* ---- per-phase tables built at start: random touch orders and Zipf CDFs ---- */

static uint32_t **perms;
static double **cdfs;

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die("out of memory (%zu bytes)", n);
	return p;
}

static void build_tables(void)
{
	perms = calloc((size_t)NPHASES + 1, sizeof *perms);
	cdfs = calloc((size_t)NPHASES + 1, sizeof *cdfs);
	if (!perms || !cdfs)
		die("out of memory");
	for (int i = 0; i < NPHASES; i++) {
		const struct phase *p = &PHASES[i];
		if (p->kind != K_ACCESS)
			continue;
		if (p->pattern == P_PERM) {
			uint32_t *perm = xmalloc(p->pages * sizeof *perm);
			for (uint64_t k = 0; k < p->pages; k++)
				perm[k] = (uint32_t)k;
			struct rng r = {p->perm_seed};
			for (uint64_t k = p->pages; k > 1; k--) {
				uint64_t j = rng_below(&r, k);
				uint32_t t = perm[k - 1];
				perm[k - 1] = perm[j];
				perm[j] = t;
			}
			perms[i] = perm;
		} else if (p->pattern == P_ZIPF) {
			/* P(rank <= k) for weights (k+1)^-s; the last entry exactly 1 (as phases.rs). */
			double *cdf = xmalloc(p->pages * sizeof *cdf);
			double sum = 0.0;
			for (uint64_t k = 0; k < p->pages; k++) {
				sum += pow_neg((double)(k + 1), p->zipf_s);
				cdf[k] = sum;
			}
			for (uint64_t k = 0; k < p->pages; k++)
				cdf[k] /= sum;
			cdf[p->pages - 1] = 1.0;
			cdfs[i] = cdf;
		}
	}
}

/* First rank whose cumulative probability exceeds u. */
static inline uint64_t zipf_rank(const double *cdf, uint64_t n, double u)
{
	uint64_t lo = 0, hi = n;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (cdf[mid] <= u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n ? lo : n - 1;
}

/* ---- system calls ---- */

static int *fds;

static void open_files(void)
{
	const char *dir = getenv("TIERLAB_FILE_DIR");
	if (!dir || !*dir)
		dir = "/tmp";
	fds = xmalloc(((size_t)NFILES + 1) * sizeof *fds);
	for (int i = 0; i < NREGIONS; i++) {
		const struct region *r = &REGIONS[i];
		if (r->file < 0)
			continue;
		if (FILE_SHMEM[r->file]) {
			/* shmem, as MAP_SHARED | MAP_ANONYMOUS maps it, but surviving a munmap as the
			 * simulator's file does. */
			int fd = (int)syscall(SYS_memfd_create, "tierlab", 1U /* MFD_CLOEXEC */);
			if (fd < 0)
				die("memfd_create: %s", strerror(errno));
			if (ftruncate(fd, (off_t)(r->pages * PAGE)) != 0)
				die("ftruncate(memfd, %llu): %s", (unsigned long long)(r->pages * PAGE),
				    strerror(errno));
			fds[r->file] = fd;
			continue;
		}
		char path[4096];
		snprintf(path, sizeof path, "%s/tierlab-%d-%d.dat", dir, (int)getpid(), r->file);
		int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			die("open(%s): %s", path, strerror(errno));
		if (ftruncate(fd, (off_t)(r->pages * PAGE)) != 0)
			die("ftruncate(%s, %llu): %s", path, (unsigned long long)(r->pages * PAGE),
			    strerror(errno));
		/* The mappings (and fds[]) keep it; nothing is left behind in the directory. */
		unlink(path);
		fds[r->file] = fd;
	}
}

static char *read_file(const char *path);

/* "; in use: <the /proc/self/maps line>" of a mapping overlapping [addr, addr + len). */
static void mapping_at(uint64_t addr, uint64_t len, char *out, size_t size)
{
	char *maps = read_file("/proc/self/maps");
	for (char *l = maps; l && *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		unsigned long long lo, hi;
		if (sscanf(l, "%llx-%llx", &lo, &hi) == 2 && lo < addr + len && hi > addr) {
			snprintf(out, size, "; in use: %s", l);
			break;
		}
		l = nl ? nl + 1 : NULL;
	}
	free(maps);
}

/* mmap exactly at `addr` without replacing anything (the simulator's mmap fails on overlap). */
static void map_range(uint64_t addr, uint64_t len, int prot, int file, uint64_t pgoff)
{
	int flags = file < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED;
	int fd = file < 0 ? -1 : fds[file];
	off_t off = file < 0 ? 0 : (off_t)(pgoff * PAGE);
	void *want = (void *)(uintptr_t)addr;
	void *p = mmap(want, len, prot, flags | MAP_FIXED_NOREPLACE, fd, off);
	if (p == want)
		return;
	if (p != MAP_FAILED) {
		/* A kernel before 4.17 takes MAP_FIXED_NOREPLACE as a hint: the range is busy. */
		munmap(p, len);
		errno = EEXIST;
	}
	if (errno == EINVAL || errno == EOPNOTSUPP) {
		/* A kernel refusing the flag: MAP_FIXED. */
		p = mmap(want, len, prot, flags | MAP_FIXED, fd, off);
		if (p == want)
			return;
	}
	int e = errno;
	char in_use[256] = "";
	if (e == EEXIST)
		mapping_at(addr, len, in_use, sizeof in_use);
	die("mmap(0x%llx, %llu, prot %d, %s): %s%s", (unsigned long long)addr,
	    (unsigned long long)len, prot, file < 0 ? "anon" : "file", strerror(e), in_use);
}

static atomic_int warned_numa, warned_node, warned_vmstat;
/* 0 once move_pages(2) cannot report residency: presence from pagemap instead. */
static atomic_int numa_query = 1;

/* move_pages(2) failing this way means no NUMA (or no right to it), not a bad request. */
static int no_numa_errno(int e)
{
	return e == ENOSYS || e == EINVAL || e == EPERM;
}

/* move_pages(MPOL_MF_MOVE) of every page of the range to `node`. */
static void move_range(uint64_t addr, uint64_t len, int node, const char *phase)
{
	void *pages[CHUNK];
	int nodes[CHUNK], status[CHUNK];
	uint64_t n = len / PAGE;
	for (uint64_t done = 0; done < n;) {
		unsigned long k = (unsigned long)(n - done < CHUNK ? n - done : CHUNK);
		for (unsigned long j = 0; j < k; j++) {
			pages[j] = (void *)(uintptr_t)(addr + (done + j) * PAGE);
			nodes[j] = node;
		}
		long r = syscall(SYS_move_pages, 0, k, pages, nodes, status, MPOL_MF_MOVE);
		if (r < 0) {
			int e = errno;
			if (no_numa_errno(e)) {
				warn_once(&warned_numa, "move_pages: %s: no NUMA; phase %s moved nothing",
					  strerror(e), phase);
				return;
			}
			if (e == ENODEV) {
				warn_once(&warned_node, "move_pages to node %d: %s; phase %s moved nothing",
					  node, strerror(e), phase);
				return;
			}
			die("move_pages(0x%llx, %lu pages, node %d) in phase %s: %s",
			    (unsigned long long)(addr + done * PAGE), k, node, phase, strerror(e));
		}
		done += k;
	}
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ULL),
			      .tv_nsec = (long)(t % 1000000000ULL)};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* ---- the phases ---- */

static inline void spin(uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		__asm__ __volatile__("" ::: "memory");
}

/* Each worker's accesses so far, shared with the sampler process (mapped before the fork);
 * a worker publishes its count at every pacing batch and at the end of each phase. */
static _Atomic uint64_t *live_accesses;
/* Each worker's thread id (after the counters in the same page), for its schedstat. */
static _Atomic uint64_t *worker_tids;
/* This worker's accesses in the phases it has finished. */
static _Thread_local uint64_t accesses_before;
/* This thread's pacing start in the access phase it ran last; 0: not paced. */
static _Thread_local uint64_t tl_pace_start;
/* 1 in a forked child, which publishes nothing: the counter slots are the workers'. */
static int in_child;

/* Publish worker t's accesses so far to the sampler. */
static inline void publish(int t, uint64_t n)
{
	if (!in_child)
		atomic_store_explicit(&live_accesses[t], n, memory_order_relaxed);
}

/*
 * Where paced thread t's first slot of phase p lies: on the next multiple of the batch
 * `period` after `now`, moved by t's share of the period among the phase's participants, so
 * that their wake-ups lie evenly apart, however the barrier released them. Under QEMU's
 * round-robin vCPUs a thread still in its batch or its sleep's entry when another's timer
 * fires runs on the instruction clock through that one's turn, so readers whose slots lie a
 * few microseconds apart share their run time by races of a few hundred instructions.
 */
static uint64_t pace_origin(int t, const struct phase *p, uint64_t period, uint64_t now)
{
	int n = 0, rank = 0;
	for (int j = 0; j < NTHREADS; j++) {
		rank += j < t && p->participants[j];
		n += p->participants[j] != 0;
	}
	uint64_t grid = (now / period + 1) * period;
	return grid + (n > 1 ? period * (uint64_t)rank / (uint64_t)n : 0);
}

/* One thread's accesses of an access phase; returns how many it made. */
static uint64_t run_access(int t, int i, const struct phase *p, struct rng *rng)
{
	uint64_t begin = now_ns();
	int timed = p->duration_ms >= 0.0;
	uint64_t deadline = timed ? begin + (uint64_t)(p->duration_ms * 1e6) : 0;
	uint64_t batch = 0;
	if (p->pace_ns)
		batch = (MIN_SLEEP_NS + p->pace_ns - 1) / p->pace_ns;
	uint64_t start = batch ? pace_origin(t, p, batch * p->pace_ns, begin) : begin;
	tl_pace_start = batch ? start : 0;
	const uint32_t *perm = perms[i];
	const double *cdf = cdfs[i];
	uint8_t sink = 0;
	uint64_t k;
	for (k = 0; timed || k < p->count; k++) {
		if (batch && k % batch == 0) {
			publish(t, accesses_before + k);
			uint64_t slot = start + k * p->pace_ns;
			if (timed && slot >= deadline)
				break;
			sleep_until(slot);
			if (timed && now_ns() >= deadline)
				break;
		} else if (timed && !batch && (k & 1023) == 0 && now_ns() >= deadline) {
			break;
		}
		if (p->gap && k > 0)
			spin(p->gap[t]);
		uint64_t a;
		switch (p->pattern) {
		case P_SEQ:
			a = p->addr + k * PAGE;
			break;
		case P_REV:
			a = p->addr + (p->pages - 1 - k) * PAGE;
			break;
		case P_PERM:
			a = p->addr + (uint64_t)perm[k] * PAGE;
			break;
		case P_STRIDE:
			a = p->addr + k * p->stride;
			break;
		case P_UNIFORM: {
			uint64_t page = rng_below(rng, p->pages);
			a = p->addr + page * PAGE + rng_below(rng, PAGE / 8) * 8;
			break;
		}
		default: { /* P_ZIPF */
			uint64_t rank = zipf_rank(cdf, p->pages, rng_unit(rng));
			uint64_t page = p->hot_last ? p->pages - 1 - rank : rank;
			a = p->addr + page * PAGE + rng_below(rng, PAGE / 8) * 8;
			break;
		}
		}
		int store = p->writes == W_ALWAYS ||
			    (p->writes == W_FRACTION && rng_unit(rng) < p->write_fraction);
		volatile uint8_t *b = (volatile uint8_t *)(uintptr_t)a;
		if (store)
			*b = (uint8_t)k;
		else
			sink += *b;
	}
	__asm__ __volatile__("" : : "r"(sink));
	return k;
}

static void fork_children(int t, int i);
static void wait_children(int t, const char *phase);

/* What a participating thread does in phase `i`; returns its accesses. */
static uint64_t run_phase(int t, int i, struct rng *rng)
{
	const struct phase *p = &PHASES[i];
	uint64_t n = 0;
	switch (p->kind) {
	case K_ACCESS:
		n = run_access(t, i, p, rng);
		accesses_before += n;
		publish(t, accesses_before);
		break;
	case K_MMAP:
		map_range(p->addr, p->len, p->prot, p->file, p->pgoff);
		break;
	case K_MUNMAP:
		if (munmap((void *)(uintptr_t)p->addr, p->len) != 0)
			die("munmap(0x%llx, %llu) in phase %s: %s", (unsigned long long)p->addr,
			    (unsigned long long)p->len, p->name, strerror(errno));
		break;
	case K_MPROTECT:
		if (mprotect((void *)(uintptr_t)p->addr, p->len, p->prot) != 0)
			die("mprotect(0x%llx, %llu, %d) in phase %s: %s", (unsigned long long)p->addr,
			    (unsigned long long)p->len, p->prot, p->name, strerror(errno));
		break;
	case K_MADVISE:
		if (madvise((void *)(uintptr_t)p->addr, p->len, p->advice) != 0)
			die("madvise(0x%llx, %llu, %d) in phase %s: %s", (unsigned long long)p->addr,
			    (unsigned long long)p->len, p->advice, p->name, strerror(errno));
		break;
	case K_MOVE:
		move_range(p->addr, p->len, p->node, p->name);
		break;
	case K_SLEEP: {
		struct timespec ts = {.tv_sec = (time_t)(p->sleep_ns / 1000000000ULL),
				      .tv_nsec = (long)(p->sleep_ns % 1000000000ULL)};
		while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
			;
		break;
	}
	case K_FORK:
		fork_children(t, i);
		break;
	case K_WAIT:
		wait_children(t, p->name);
		break;
	default:
		break;
	}
	if (t == p->lead && p->bind_node >= 0)
		move_range(p->bind_addr, p->bind_len, p->bind_node, p->name);
	return n;
}

static pthread_barrier_t barrier;
/* Accesses per thread of the phase instance just ended; indexed by instance parity, so the
 * serial thread reads one half while the others fill the other. */
static uint64_t *accesses[2];
/* CPU time (user + system: the kernel's sum_exec_runtime) per thread in that instance, ns. */
static uint64_t *cpu_used[2];
/* When each thread's pacing schedule began in that instance (its first slot), ns; 0: none. */
static uint64_t *pace_start[2];
/* When the current phase instance began (written by the serial thread of each barrier). */
static uint64_t phase_begin;

/* The barrier after phase instance `k` (phase `i`; -1: the start barrier). */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void end_phase(int t, int i, uint64_t k, uint64_t n, uint64_t cpu)
{
	accesses[k & 1][t] = n;
	cpu_used[k & 1][t] = cpu;
	pace_start[k & 1][t] = tl_pace_start;
	tl_pace_start = 0;
	int r = pthread_barrier_wait(&barrier);
	if (r != 0 && r != PTHREAD_BARRIER_SERIAL_THREAD)
		die("pthread_barrier_wait: %s", strerror(r));
	if (r != PTHREAD_BARRIER_SERIAL_THREAD)
		return;
	uint64_t end = now_ns();
	if (i >= 0) {
		uint64_t total = 0, cpu_total = 0;
		int paced = 0;
		for (int j = 0; j < NTHREADS; j++) {
			total += accesses[k & 1][j];
			cpu_total += cpu_used[k & 1][j];
			paced |= pace_start[k & 1][j] != 0;
		}
		struct sb b = {0};
		sb_printf(&b,
			  "{\"phase\":%s,\"begin_ms\":%.3f,\"end_ms\":%.3f,\"accesses\":%llu,"
			  "\"cpu_ms\":%.3f",
			  PHASES[i].name, ms_since_start(phase_begin), ms_since_start(end),
			  (unsigned long long)total, (double)cpu_total / 1e6);
		/* Where each thread's pace slots fall: the first slot, to the ns (null: not paced). */
		if (paced) {
			sb_printf(&b, ",\"pace_start_ms\":[");
			for (int j = 0; j < NTHREADS; j++) {
				if (j)
					sb_printf(&b, ",");
				if (pace_start[k & 1][j])
					sb_printf(&b, "%.6f", ms_since_start(pace_start[k & 1][j]));
				else
					sb_printf(&b, "null");
			}
			sb_printf(&b, "]");
		}
		sb_printf(&b, "}");
		emit(b.s);
		free(b.s);
	}
	phase_begin = end;
}

/* ---- fork and wait phases ---- */

/* The children a worker forked and has not waited for. */
struct kids {
	pid_t *pid;
	size_t n, cap;
};
/* One per worker, which alone uses it. */
static struct kids *kids;
/* Children this worker forked so far: numbers each child's random numbers. */
static _Thread_local uint64_t forked;
/* The write end of the sampler's stop pipe: a child closes it, or the sampler would wait
 * for the child's exit as well as main's close. */
static int sampler_stop_fd = -1;
/* The CPUs main started with: a pinned worker's child gets them back, as the simulator puts
 * a forked child on the idlest CPU rather than on its parent's. */
static cpu_set_t start_cpus;
static int have_start_cpus;

/* A child's line for each phase it ran (not a "phase" line: those end the workers' phases). */
static void child_line(int t, uint64_t k, int i, uint64_t begin, uint64_t n, uint64_t cpu)
{
	struct sb b = {0};
	sb_printf(&b,
		  "{\"child_phase\":%s,\"thread\":%d,\"child\":%llu,\"begin_ms\":%.3f,"
		  "\"end_ms\":%.3f,\"accesses\":%llu,\"cpu_ms\":%.3f}",
		  PHASES[i].name, t, (unsigned long long)k, ms_since_start(begin),
		  ms_since_start(now_ns()), (unsigned long long)n, (double)cpu / 1e6);
	emit(b.s);
	free(b.s);
}

/* Child k of worker t, forked in phase fi: that phase's child list, alone and with the worker's
 * per-thread keys (threads, gap_cycles), then _exit (no atexit handlers, no stdio flush). */
__attribute__((noreturn)) static void run_child(int t, int fi, uint64_t k)
{
	in_child = 1;
	/* The sampler is the parent's: a failing child must not stop it. */
	sampler_child = 0;
	if (sampler_stop_fd >= 0)
		close(sampler_stop_fd);
	if (have_start_cpus && PLACEMENT[t] >= 0)
		sched_setaffinity(0, sizeof start_cpus, &start_cpus);
	struct rng rng = {mix(mix(SEED, CHILD_SALT, (uint64_t)t), CHILD_SALT, k)};
	const struct phase *f = &PHASES[fi];
	for (int m = 0; m < f->nchild; m++) {
		int i = f->child[m];
		if (!PHASES[i].participants[t])
			continue;
		uint64_t begin = now_ns(), cpu0 = thread_cpu_ns();
		uint64_t n = run_phase(t, i, &rng);
		child_line(t, k, i, begin, n, thread_cpu_ns() - cpu0);
	}
	_exit(0);
}

/* Phase i by worker t: fork its children; the worker goes on at once. */
static void fork_children(int t, int i)
{
	const struct phase *p = &PHASES[i];
	struct kids *w = &kids[t];
	for (uint64_t c = 0; c < p->count; c++) {
		if (w->n == w->cap) {
			w->cap = w->cap * 2 + 8;
			w->pid = realloc(w->pid, w->cap * sizeof *w->pid);
			if (!w->pid)
				die("out of memory");
		}
		uint64_t k = forked++;
		pid_t pid = fork();
		if (pid < 0)
			die("fork in phase %s: %s", p->name, strerror(errno));
		if (pid == 0)
			run_child(t, i, k);
		w->pid[w->n++] = pid;
	}
}

/* Wait for every child worker t forked and has not waited for (`phase`: the wait phase, NULL
 * after the worker's last phase); a child that failed fails the program. */
static void wait_children(int t, const char *phase)
{
	struct kids *w = &kids[t];
	const char *where = phase ? phase : "(the worker's end)";
	for (size_t j = 0; j < w->n; j++) {
		int status;
		pid_t r;
		while ((r = waitpid(w->pid[j], &status, 0)) < 0 && errno == EINTR)
			;
		if (r < 0)
			die("waitpid(%d) in phase %s: %s", (int)w->pid[j], where, strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			die("child %d of thread %d, waited for in phase %s, failed (wait status %#x)",
			    (int)w->pid[j], t, where, (unsigned)status);
	}
	w->n = 0;
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	atomic_store(&worker_tids[t], (uint64_t)syscall(SYS_gettid));
	char mark[48];
	snprintf(mark, sizeof mark, "tierlab worker=%d", t);
	trace_mark(mark);
	if (PLACEMENT[t] >= 0) {
		if (PLACEMENT[t] >= CPU_SETSIZE)
			die("thread %d: CPU %d is beyond CPU_SETSIZE", t, PLACEMENT[t]);
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET((size_t)PLACEMENT[t], &set);
		if (sched_setaffinity(0, sizeof set, &set) != 0)
			die("sched_setaffinity(thread %d, CPU %d): %s", t, PLACEMENT[t],
			    strerror(errno));
	}
	struct rng rng = {mix(SEED, 0x74687264, (uint64_t)t)};
	/* The simulator's barrier after thread 0's mmaps. */
	end_phase(t, -1, 1, 0, 0);
	uint64_t k = 0;
	for (uint64_t outer = 0; outer < LOOPS; outer++)
		for (int s = 0; s < NSTEPS; s++)
			for (uint64_t rep = 0; rep < STEPS[s].times; rep++)
				for (int m = 0; m < STEPS[s].nmembers; m++, k++) {
					int i = STEPS[s].members[m];
					uint64_t n = 0, cpu0 = thread_cpu_ns();
					if (PHASES[i].participants[t])
						n = run_phase(t, i, &rng);
					end_phase(t, i, k, n, thread_cpu_ns() - cpu0);
				}
	/* The children no wait phase waited for, as the simulator's worker: they do not outlive
	 * the workload's process. */
	wait_children(t, NULL);
	return NULL;
}

/* ---- the sampler ---- */

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	struct sb b = {0};
	char buf[8192];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		sb_printf(&b, "%.*s", (int)n, buf);
	fclose(f);
	if (!b.s)
		sb_printf(&b, "%s", "");
	return b.s;
}

/* The process whose pages are sampled: the workload (the sampler runs in a process of its
 * own, so that its work does not count as the workload's run time, which paces NUMA
 * balancing's scanner). */
static pid_t workload_pid;

/* Presence of pages of the workload from /proc/PID/pagemap (bit 63), for kernels without NUMA. */
static void pagemap_present(uint64_t addr, unsigned long k, int *status)
{
	static int fd = -2;
	if (fd == -2) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/pagemap", (int)workload_pid);
		fd = open(path, O_RDONLY);
	}
	uint64_t ent[CHUNK];
	ssize_t want = (ssize_t)(k * sizeof ent[0]);
	if (fd < 0 || pread(fd, ent, (size_t)want, (off_t)(addr / PAGE * sizeof ent[0])) != want) {
		for (unsigned long j = 0; j < k; j++)
			status[j] = -ENOENT;
		return;
	}
	for (unsigned long j = 0; j < k; j++)
		status[j] = (ent[j] >> 63) & 1 ? 0 : -ENOENT;
}

/* Per-page residency of [addr, addr + pages): status[j] = node, or < 0 if not present. */
static void residency(uint64_t addr, uint64_t pages, int *status)
{
	static void *ptrs[CHUNK];
	for (uint64_t done = 0; done < pages;) {
		unsigned long k = (unsigned long)(pages - done < CHUNK ? pages - done : CHUNK);
		uint64_t a = addr + done * PAGE;
		if (atomic_load(&numa_query)) {
			for (unsigned long j = 0; j < k; j++)
				ptrs[j] = (void *)(uintptr_t)(a + j * PAGE);
			long r = syscall(SYS_move_pages, workload_pid, k, ptrs, NULL, status + done, 0);
			if (r >= 0) {
				done += k;
				continue;
			}
			int e = errno;
			if (!no_numa_errno(e))
				die("move_pages(0x%llx, %lu pages, query): %s", (unsigned long long)a, k,
				    strerror(e));
			atomic_store(&numa_query, 0);
			warn_once(&warned_numa,
				  "move_pages: %s: no NUMA; residency from pagemap, all on node 0",
				  strerror(e));
		}
		pagemap_present(a, k, status + done);
		done += k;
	}
}

static int **region_status;

static void count_nodes(const int *status, uint64_t pages, uint64_t *counts, int *width)
{
	for (int n = 0; n < MAXNODES; n++)
		counts[n] = 0;
	for (uint64_t j = 0; j < pages; j++) {
		int s = status[j];
		if (s >= 0 && s < MAXNODES) {
			counts[s]++;
			if (s + 1 > *width)
				*width = s + 1;
		}
	}
}

static void sb_counts(struct sb *b, const uint64_t *counts, int width)
{
	sb_printf(b, "[");
	for (int n = 0; n < width; n++)
		sb_printf(b, "%s%llu", n ? "," : "", (unsigned long long)counts[n]);
	sb_printf(b, "]");
}

/*
 * Pages per node of every region from /proc/PID/numa_maps (its N<node>=<pages> fields, one
 * line per VMA, summed over the VMAs that start inside the region): one page-table walk
 * (show_numa_map's gather_pte_stats), 2-35 ms per sample on the validation guests where
 * move_pages' per-page lookups took 110-240 ms, so the sampler takes less of the vCPUs'
 * shared time under TCG. Returns 0
 * when numa_maps cannot be read (no NUMA), and the caller asks page by page.
 */
static int per_page_residency; /* TIERLAB_RESIDENCY=move_pages: never numa_maps */
static int numa_maps_counts(uint64_t (*counts)[MAXNODES], int *width)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/numa_maps", (int)workload_pid);
	char *text = read_file(path);
	if (!text)
		return 0;
	for (int i = 0; i < NREGIONS; i++)
		for (int n = 0; n < MAXNODES; n++)
			counts[i][n] = 0;
	for (char *l = text; l && *l;) {
		char *end = strchr(l, '\n');
		if (end)
			*end = 0;
		unsigned long long start = strtoull(l, NULL, 16);
		int r = -1;
		for (int i = 0; i < NREGIONS; i++)
			if (start >= REGIONS[i].start && start < REGIONS[i].start + REGIONS[i].pages * PAGE)
				r = i;
		for (char *f = r >= 0 ? strstr(l, " N") : NULL; f; f = strstr(f + 1, " N")) {
			char *eq;
			long node = strtol(f + 2, &eq, 10);
			if (eq == f + 2 || *eq != '=' || node < 0 || node >= MAXNODES)
				continue;
			counts[r][node] += strtoull(eq + 1, NULL, 10);
			if (node + 1 > *width)
				*width = (int)node + 1;
		}
		l = end ? end + 1 : NULL;
	}
	free(text);
	return 1;
}

/* The zones' free pages and watermarks as JSON; `full` rereads zoneinfo (zoneinfo.c). */
static void sb_zones(struct sb *b, int full);

/* The value of counter `name` in /proc/vmstat's text `vm` (NULL: not there). */
static const char *vmstat_value(const char *vm, const char *name)
{
	size_t len = strlen(name);
	for (const char *l = vm; l && *l;) {
		if (strncmp(l, name, len) == 0 && l[len] == ' ')
			return l + len + 1;
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	return NULL;
}

/* Compiled in only when the program samples node meminfo fields (the generator defines
 * TIERLAB_NODE_MEMINFO): without them the program is the same binary as before they existed,
 * so runs on the guest's instruction clock stay as they were. */
#ifdef TIERLAB_NODE_MEMINFO
/* Field `name` of a node's meminfo text ("Node 0 AnonHugePages:    2048 kB"), kB; -1 when
 * absent. */
static long long node_meminfo_value(const char *text, const char *name)
{
	size_t len = strlen(name);
	for (const char *l = text; l && *l;) {
		if (strncmp(l, "Node ", 5) == 0) {
			const char *p = l + 5;
			while (*p >= '0' && *p <= '9')
				p++;
			while (*p == ' ')
				p++;
			if (strncmp(p, name, len) == 0 && p[len] == ':') {
				char *e;
				long long v = strtoll(p + len + 1, &e, 10);
				return e == p + len + 1 ? -1 : v;
			}
		}
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	return -1;
}

/* `,"node_meminfo":{"<field>":[<node 0>,..],..}`: each NODE_MEMINFO field of nodes 0 to
 * `width` - 1 from /sys/devices/system/node/nodeN/meminfo (TIERLAB_NODE_DIR names another
 * directory), null where unreadable. One read per node. */
static void sb_node_meminfo(struct sb *b, int width)
{
	const char *dir = getenv("TIERLAB_NODE_DIR");
	if (!dir || !*dir)
		dir = "/sys/devices/system/node";
	char *texts[MAXNODES] = {0};
	for (int n = 0; n < width; n++) {
		char path[512];
		snprintf(path, sizeof path, "%s/node%d/meminfo", dir, n);
		texts[n] = read_file(path);
	}
	sb_printf(b, ",\"node_meminfo\":{");
	for (int f = 0; f < NNODE_MEMINFO; f++) {
		sb_printf(b, "%s\"", f ? "," : "");
		sb_json_str(b, NODE_MEMINFO[f]);
		sb_printf(b, "\":[");
		for (int n = 0; n < width; n++) {
			long long v = texts[n] ? node_meminfo_value(texts[n], NODE_MEMINFO[f]) : -1;
			if (v < 0)
				sb_printf(b, "%snull", n ? "," : "");
			else
				sb_printf(b, "%s%lld", n ? "," : "", v);
		}
		sb_printf(b, "]");
	}
	sb_printf(b, "}");
	for (int n = 0; n < width; n++)
		free(texts[n]);
}
#endif

/* One sample line (`last`: the one after the last phase); returns how long it took (ns). */
static uint64_t sample(int last)
{
	uint64_t t = now_ns(), cpu0 = thread_cpu_ns();
	struct sb b = {0};
	sb_printf(&b, "{\"t_ms\":%.3f,\"regions\":{", ms_since_start(t));
	int width = NNODES < MAXNODES ? NNODES : MAXNODES;
	if (width < 1)
		width = 1;
	/* Nodes beyond NNODES still show (the kernel's machine may have more). */
	uint64_t counts[MAXNODES];
	static uint64_t (*per_region)[MAXNODES];
	if (!per_region)
		per_region = xmalloc(((size_t)NREGIONS + 1) * sizeof *per_region);
	/* Watched sub-ranges need each page's node: then every region is asked page by page. */
	if (NWATCHES > 0 || per_page_residency || !atomic_load(&numa_query) ||
	    !numa_maps_counts(per_region, &width)) {
		for (int i = 0; i < NREGIONS; i++) {
			residency(REGIONS[i].start, REGIONS[i].pages, region_status[i]);
			count_nodes(region_status[i], REGIONS[i].pages, per_region[i], &width);
		}
	}
	for (int i = 0; i < NREGIONS; i++) {
		sb_printf(&b, "%s%s:", i ? "," : "", REGIONS[i].name);
		sb_counts(&b, per_region[i], width);
	}
	for (int w = 0; w < NWATCHES; w++) {
		const struct watch *x = &WATCHES[w];
		count_nodes(region_status[x->region] + x->offset, x->pages, counts, &width);
		sb_printf(&b, "%s%s:", NREGIONS + w ? "," : "", x->name);
		sb_counts(&b, counts, width);
	}
	sb_printf(&b, "},\"vmstat\":{");
	/* The end counters: in the last sample only, after the workload. */
	int nend = last ? NEND_COUNTERS : 0;
	char *vm = NCOUNTERS + nend ? read_file("/proc/vmstat") : NULL;
	if (NCOUNTERS + nend && !vm)
		warn_once(&warned_vmstat, "/proc/vmstat: %s; counters reported as null",
			  strerror(errno));
	for (int c = 0; c < NCOUNTERS + nend; c++) {
		const char *name = c < NCOUNTERS ? COUNTERS[c] : END_COUNTERS[c - NCOUNTERS];
		const char *v = vmstat_value(vm, name);
		sb_printf(&b, "%s\"", c ? "," : "");
		sb_json_str(&b, name);
		if (v)
			sb_printf(&b, "\":%llu", strtoull(v, NULL, 10));
		else
			sb_printf(&b, "\":null");
	}
	free(vm);
	sb_printf(&b, "},\"tlb\":[");
	char *irq = read_file("/proc/interrupts");
	for (char *l = irq; l && *l;) {
		char *p = l;
		while (*p == ' ')
			p++;
		if (strncmp(p, "TLB:", 4) == 0) {
			p += 4;
			for (int n = 0;; n++) {
				char *e;
				unsigned long long v = strtoull(p, &e, 10);
				if (e == p || (*e != ' ' && *e != '\n' && *e != '\0'))
					break;
				sb_printf(&b, "%s%llu", n ? "," : "", v);
				p = e;
			}
			break;
		}
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	free(irq);
	sb_printf(&b, "],\"accesses\":[");
	for (int w = 0; w < NTHREADS; w++)
		sb_printf(&b, "%s%llu", w ? "," : "",
			  (unsigned long long)atomic_load_explicit(&live_accesses[w],
								   memory_order_relaxed));
	/* Each worker's run time and run-queue wait so far (/proc/PID/task/TID/schedstat, ns). */
	sb_printf(&b, "],\"schedstat\":[");
	for (int w = 0; w < NTHREADS; w++) {
		char path[96];
		unsigned long long run = 0, wait = 0;
		snprintf(path, sizeof path, "/proc/%d/task/%llu/schedstat", (int)workload_pid,
			 (unsigned long long)atomic_load(&worker_tids[w]));
		FILE *f = atomic_load(&worker_tids[w]) ? fopen(path, "r") : NULL;
		if (f) {
			if (fscanf(f, "%llu %llu", &run, &wait) != 2)
				run = wait = 0;
			fclose(f);
		}
		sb_printf(&b, "%s[%llu,%llu]", w ? "," : "", run, wait);
	}
	sb_printf(&b, "],\"zones\":");
	sb_zones(&b, last);
#ifdef TIERLAB_NODE_MEMINFO
	sb_node_meminfo(&b, width);
#endif
	uint64_t span = now_ns() - t;
	/* Its own CPU time too: the load it puts on the machine, which the stand-in repeats. */
	sb_printf(&b, ",\"span_ms\":%.3f,\"cpu_ms\":%.3f,\"sampler_cpu\":%d}", (double)span / 1e6,
		  (double)(thread_cpu_ns() - cpu0) / 1e6, sched_getcpu());
	emit(b.s);
	free(b.s);
	return span;
}

/* The sampler process: a sample every SAMPLE_MS until the workload closes the pipe, then one
 * last sample. A sample that took long is followed by at least as long an idle time. */
static void sampler_process(int stop_fd)
{
	/* With workers pinned: pinned to the first CPU none is pinned to, if one is left (best
	 * effort), as the stand-in pins it. Free to move, it would change which CPU kswapd runs
	 * on (select_idle_sibling) in ways the stand-in does not. No worker pinned: left to the
	 * scheduler, as the workers are. */
	cpu_set_t set;
	int pinned = 0;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		CPU_ZERO(&set);
	for (int t = 0; t < NTHREADS; t++) {
		pinned += PLACEMENT[t] >= 0;
		if (PLACEMENT[t] >= 0 && PLACEMENT[t] < CPU_SETSIZE)
			CPU_CLR((size_t)PLACEMENT[t], &set);
	}
	for (int c = 0; pinned > 0 && c < CPU_SETSIZE; c++) {
		if (CPU_ISSET((size_t)c, &set)) {
			cpu_set_t one;
			CPU_ZERO(&one);
			CPU_SET((size_t)c, &one);
			sched_setaffinity(0, sizeof one, &one);
			break;
		}
	}
	uint64_t interval = (uint64_t)(SAMPLE_MS * 1e6);
	if (interval == 0)
		interval = 1;
	uint64_t next = now_ns();
	for (;;) {
		uint64_t span = sample(0);
		next += interval;
		uint64_t now = now_ns();
		if (next < now + span)
			next = now + span;
		struct pollfd p = {.fd = stop_fd, .events = POLLIN};
		int ms = (int)((next - now + 999999) / 1000000);
		if (poll(&p, 1, ms) > 0)
			break;
	}
	sample(1); /* the state at the end */
	_exit(0);
}

/*
 * Run with ADDR_NO_RANDOMIZE (re-executing once): static glibc sets up its TLS with sbrk()
 * before main, and recent x86-64 kernels start the brk heap anywhere in the GiB above the
 * program, which is where the simulator lays regions out (from 0x10000000). Without
 * randomisation the heap starts right after the program. Best effort: on failure, go on.
 */
static void no_aslr(char **argv)
{
	int pers = personality(0xffffffff);
	if (pers == -1 || (pers & ADDR_NO_RANDOMIZE))
		return;
	if (personality((unsigned long)pers | ADDR_NO_RANDOMIZE) == -1)
		return;
	execv("/proc/self/exe", argv);
}

/* The largest anonymous read-write region, the probes' subject; -1 if none. */
static int largest_anon_region(void)
{
	int best = -1;
	for (int i = 0; i < NREGIONS; i++)
		if (REGIONS[i].file < 0 && REGIONS[i].prot == (PROT_READ | PROT_WRITE) &&
		    (best < 0 || REGIONS[i].pages > REGIONS[best].pages))
			best = i;
	return best;
}

/*
 * `--pte-probe` (calibration only): what change_pte_range costs per PTE, the walk NUMA
 * balancing's scanner shares with mprotect. After the workload, the largest anonymous
 * read-write region is made read-only and writable again on the main thread's CPU clock.
 */
static void pte_probe(void)
{
	int best = largest_anon_region();
	if (best < 0)
		return;
	const struct region *r = &REGIONS[best];
	size_t len = (size_t)(r->pages * PAGE);
	uint64_t cpu0 = thread_cpu_ns();
	if (mprotect((void *)(uintptr_t)r->start, len, PROT_READ) != 0 ||
	    mprotect((void *)(uintptr_t)r->start, len, PROT_READ | PROT_WRITE) != 0)
		return;
	uint64_t spent = thread_cpu_ns() - cpu0;
	char line[256];
	snprintf(line, sizeof line, "{\"pte_probe\":{\"region\":%s,\"pages\":%llu,\"ns\":%llu}}",
		 r->name, (unsigned long long)r->pages, (unsigned long long)spent);
	emit(line);
}

/* Sleeps the sleep probe times of each kind: 100 ms of guest time on the 50 µs grid. */
#define SLEEP_PROBE_SLEEPS 2000

/*
 * `--pte-probe` also times a paced thread's sleep on the main thread's CPU clock (its run
 * time, sum_exec_runtime): clock_nanosleep(TIMER_ABSTIME) to each slot of a MIN_SLEEP_NS
 * grid, as sleep_until paces a phase (the syscall, hrtimer_start_range_ns, schedule() out
 * and, once woken, back to user; the timer interrupt runs in the idle task), then the same
 * call to a time already past, as a thread behind its schedule makes it (the timer is
 * programmed at the clockevent's minimum delta, and the thread runs on once it fires).
 */
static void sleep_probe(void)
{
	uint64_t t0 = now_ns();
	uint64_t cpu0 = thread_cpu_ns();
	for (uint64_t k = 1; k <= SLEEP_PROBE_SLEEPS; k++)
		sleep_until(t0 + k * MIN_SLEEP_NS);
	uint64_t cpu1 = thread_cpu_ns();
	for (uint64_t k = 0; k < SLEEP_PROBE_SLEEPS; k++)
		sleep_until(t0);
	uint64_t cpu2 = thread_cpu_ns();
	char line[160];
	snprintf(line, sizeof line, "{\"sleep_probe\":{\"sleeps\":%d,\"ns\":%llu,\"past_ns\":%llu}}",
		 SLEEP_PROBE_SLEEPS, (unsigned long long)(cpu1 - cpu0),
		 (unsigned long long)(cpu2 - cpu1));
	emit(line);
}

/* Pages the migration probe moves: a few thousand, so that its fixed costs are small. */
#define MIGRATE_PROBE_PAGES 2048

/*
 * `--pte-probe` also times migration: move_pages(2) of up to MIGRATE_PROBE_PAGES pages of the
 * largest anonymous read-write region from node 0 to node 1, the migrate_pages() path that
 * promotion and demotion share, on the main thread's CPU clock. Prints the pages it moved and
 * the time; nothing without two nodes.
 */
static void migrate_probe(void)
{
	int best = largest_anon_region();
	if (best < 0)
		return;
	const struct region *r = &REGIONS[best];
	static void *pages[MIGRATE_PROBE_PAGES];
	static int nodes[MIGRATE_PROBE_PAGES], status[MIGRATE_PROBE_PAGES];
	/* The pages now on node 0, found with a query (no target nodes). */
	unsigned long n = 0;
	for (uint64_t done = 0; done < r->pages && n < MIGRATE_PROBE_PAGES;) {
		unsigned long k = (unsigned long)(r->pages - done < MIGRATE_PROBE_PAGES
							  ? r->pages - done
							  : MIGRATE_PROBE_PAGES);
		for (unsigned long j = 0; j < k; j++)
			pages[j] = (void *)(uintptr_t)(r->start + (done + j) * PAGE);
		if (syscall(SYS_move_pages, 0, k, pages, NULL, status, 0) < 0)
			return;
		/* The query has read the chunk: the kept pages, rebuilt from their index, reuse it. */
		for (unsigned long j = 0; j < k && n < MIGRATE_PROBE_PAGES; j++)
			if (status[j] == 0)
				pages[n++] = (void *)(uintptr_t)(r->start + (done + j) * PAGE);
		done += k;
	}
	if (n == 0)
		return;
	for (unsigned long j = 0; j < n; j++)
		nodes[j] = 1;
	uint64_t cpu0 = thread_cpu_ns();
	if (syscall(SYS_move_pages, 0, n, pages, nodes, status, MPOL_MF_MOVE) < 0)
		return;
	uint64_t spent = thread_cpu_ns() - cpu0;
	unsigned long moved = 0;
	for (unsigned long j = 0; j < n; j++)
		moved += status[j] == 1;
	char line[256];
	snprintf(line, sizeof line, "{\"migrate_probe\":{\"region\":%s,\"pages\":%lu,\"ns\":%llu}}",
		 r->name, moved, (unsigned long long)spent);
	emit(line);
}

/* The sum of the /proc/vmstat counters named in `names` (NULL-terminated). */
static uint64_t vmstat_sum(const char *const *names)
{
	char *vm = read_file("/proc/vmstat");
	uint64_t sum = 0;
	for (const char *const *n = names; vm && *n; n++) {
		const char *v = vmstat_value(vm, *n);
		if (v)
			sum += strtoull(v, NULL, 10);
	}
	free(vm);
	return sum;
}

/* Write `text` to a sysfs or cgroup file; 0 on success. */
static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/*
 * `--reclaim-probe` (calibration in the guest only: it reclaims the whole machine): what
 * shrink_folio_list costs per page scanned. With demotion on for the probe, 1 MiB is
 * reclaimed through the root cgroup's memory.reclaim (mm/memcontrol.c memory_reclaim →
 * try_to_free_mem_cgroup_pages), on the main thread's CPU clock. The workload's pages are
 * young from their first touch, so reclaim first rotates them (folio_referenced, as kswapd's
 * first pass does), then demotes 1 MiB. Prints the pages scanned (shrink_inactive_list's and
 * shrink_active_list's, less kswapd's), those demoted and the time.
 */
static void reclaim_probe(void)
{
	/* Reclaim of a cgroup counts no pgscan_direct, only pgscan_anon/file (kswapd's too). */
	static const char *const scanned_names[] = {"pgscan_anon", "pgscan_file", "pgrefill", NULL};
	static const char *const kswapd_names[] = {"pgscan_kswapd", NULL};
	static const char *const demoted_names[] = {"pgdemote_direct", NULL};
	const char *demotion = "/sys/kernel/mm/numa/demotion_enabled";
	char line[256];
	/* EBUSY when /init or the host mounted it already. */
	if (mount("none", "/sys/fs/cgroup", "cgroup2", 0, NULL) != 0 && errno != EBUSY) {
		snprintf(line, sizeof line, "{\"reclaim_probe\":{\"error\":\"mount cgroup2: %s\"}}",
			 strerror(errno));
		emit(line);
		return;
	}
	if (write_text(demotion, "1") != 0) {
		snprintf(line, sizeof line, "{\"reclaim_probe\":{\"error\":\"%s: %s\"}}",
			 demotion, strerror(errno));
		emit(line);
		return;
	}
	uint64_t scanned0 = vmstat_sum(scanned_names) - vmstat_sum(kswapd_names);
	uint64_t demoted0 = vmstat_sum(demoted_names);
	uint64_t cpu0 = thread_cpu_ns();
	/* -EAGAIN when less than asked could be reclaimed: the pages scanned still count. */
	int fd = open("/sys/fs/cgroup/memory.reclaim", O_WRONLY | O_CLOEXEC);
	int err = fd < 0 ? errno : 0;
	if (fd >= 0) {
		ssize_t ignored = write(fd, "1M", 2);
		(void)ignored;
		close(fd);
	}
	uint64_t spent = thread_cpu_ns() - cpu0;
	uint64_t scanned = vmstat_sum(scanned_names) - vmstat_sum(kswapd_names) - scanned0;
	uint64_t demoted = vmstat_sum(demoted_names) - demoted0;
	write_text(demotion, "0");
	if (fd < 0) {
		snprintf(line, sizeof line,
			 "{\"reclaim_probe\":{\"error\":\"/sys/fs/cgroup/memory.reclaim: %s\"}}",
			 strerror(err));
		emit(line);
		return;
	}
	snprintf(line, sizeof line,
		 "{\"reclaim_probe\":{\"scanned\":%llu,\"demoted\":%llu,\"ns\":%llu}}",
		 (unsigned long long)scanned, (unsigned long long)demoted,
		 (unsigned long long)spent);
	emit(line);
}

int main(int argc, char **argv)
{
	int probe = 0, reclaim = 0;
	for (int i = 1; i < argc; i++) {
		probe |= strcmp(argv[i], "--pte-probe") == 0;
		reclaim |= strcmp(argv[i], "--reclaim-probe") == 0;
	}
	no_aslr(argv);
	have_start_cpus = sched_getaffinity(0, sizeof start_cpus, &start_cpus) == 0;
	pthread_atfork(out_lock_take, out_lock_drop, out_lock_drop);
	const char *marker = getenv("TIERLAB_TRACE_MARKER");
	if (marker)
		trace_marker_fd = open(marker, O_WRONLY | O_CLOEXEC);
	long long tick = next_tick_expiry();
	t0_ns = now_ns();
	trace_mark("tierlab main t0");
	if (tick > 0) {
		/* Where the jiffies lie against t0 (validate moves the stand-in's to match). */
		char line[96];
		snprintf(line, sizeof line, "{\"tick_expiry_ns\":%lld}", tick - (long long)t0_ns);
		emit(line);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	const char *how = getenv("TIERLAB_RESIDENCY");
	if (how && strcmp(how, "move_pages") == 0)
		per_page_residency = 1;
	if (how && strcmp(how, "mincore") == 0) {
		atomic_store(&numa_query, 0);
		warn_once(&warned_numa, "TIERLAB_RESIDENCY=mincore: residency from pagemap, all on node 0");
	}

	build_tables();
	open_files();
	region_status = xmalloc(((size_t)NREGIONS + 1) * sizeof *region_status);
	for (int i = 0; i < NREGIONS; i++)
		region_status[i] = xmalloc(REGIONS[i].pages * sizeof(int));
	live_accesses =
		mmap(NULL, (2 * (size_t)NTHREADS * sizeof *live_accesses + PAGE - 1) / PAGE * PAGE,
		     PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (live_accesses == MAP_FAILED)
		die("mmap(access counters): %s", strerror(errno));
	worker_tids = live_accesses + NTHREADS;
	kids = calloc((size_t)NTHREADS, sizeof *kids);
	if (!kids)
		die("out of memory");
	/* Fork the sampler before the regions exist, so that it shares none of them. */
	workload_pid = getpid();
	int stop[2];
	if (pipe(stop) != 0)
		die("pipe: %s", strerror(errno));
	pid_t sampler_pid = fork();
	if (sampler_pid < 0)
		die("fork(sampler): %s", strerror(errno));
	if (sampler_pid == 0) {
		close(stop[1]);
		sampler_process(stop[0]);
	}
	sampler_child = sampler_pid;
	sampler_stop_fd = stop[1];
	close(stop[0]);
	for (int i = 0; i < NREGIONS; i++)
		map_range(REGIONS[i].start, REGIONS[i].pages * PAGE, REGIONS[i].prot, REGIONS[i].file,
			  0);
	for (int k = 0; k < 2; k++) {
		accesses[k] = calloc((size_t)NTHREADS, sizeof(uint64_t));
		cpu_used[k] = calloc((size_t)NTHREADS, sizeof(uint64_t));
		pace_start[k] = calloc((size_t)NTHREADS, sizeof(uint64_t));
		if (!accesses[k] || !cpu_used[k] || !pace_start[k])
			die("out of memory");
	}

	int e = pthread_barrier_init(&barrier, NULL, (unsigned)NTHREADS);
	if (e)
		die("pthread_barrier_init: %s", strerror(e));
	pthread_t *threads = xmalloc((size_t)NTHREADS * sizeof *threads);
	for (int t = 0; t < NTHREADS; t++) {
		e = pthread_create(&threads[t], NULL, worker, (void *)(intptr_t)t);
		if (e)
			die("pthread_create(thread %d): %s", t, strerror(e));
	}
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(threads[t], NULL);

	/* Stop the sampler: it takes one last sample and exits. */
	close(stop[1]);
	sampler_stop_fd = -1;
	waitpid(sampler_pid, NULL, 0);
	sampler_child = 0;
	if (probe) {
		pte_probe();
		migrate_probe();
		sleep_probe();
	}
	if (reclaim)
		reclaim_probe();

	char line[128];
	snprintf(line, sizeof line, "{\"done\":true,\"t_ms\":%.3f}", ms_since_start(now_ns()));
	emit(line);
	for (int f = 0; f < NFILES; f++)
		close(fds[f]);
	return 0;
}
