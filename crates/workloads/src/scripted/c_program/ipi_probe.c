/* ---- `--ipi-probe`: what a TLB shootdown costs the CPU that sends it ---- */

/*
 * The thread that changes a PTE pays for its shootdown: flush_tlb_mm_range sends IPIs to
 * the other CPUs running the mm and waits for them. On a real machine that is a few
 * microseconds; under an emulator it is whatever the emulator makes it (with -icount QEMU
 * runs every vCPU on one host thread in turn, so the wait lasts until the targets get their
 * turn). The probe measures it as the simulator charges it: the sender's CPU time per
 * mprotect(PROT_READ) of a written page (a flush) with 0, 1 and k other CPUs running the mm,
 * pinned and spinning on the page. It prints
 *   {"ipi_probe":{"rounds":R,"local_ns":a,"one_ns":b,"many_ns":c,"many":k}}
 */

#define IPI_PROBE_ROUNDS 200

static atomic_int ipi_probe_stop;
static atomic_int ipi_probe_ready;
static volatile char *ipi_probe_page;

static void ipi_probe_pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET((size_t)cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		die("ipi probe: sched_setaffinity(CPU %d): %s", cpu, strerror(errno));
}

static void *ipi_probe_spin(void *arg)
{
	ipi_probe_pin((int)(intptr_t)arg);
	atomic_fetch_add(&ipi_probe_ready, 1);
	/* Reading the page keeps its translation in this CPU's TLB and the mm loaded here. */
	while (!atomic_load_explicit(&ipi_probe_stop, memory_order_relaxed))
		(void)ipi_probe_page[0];
	return NULL;
}

/* The sender's CPU time (ns) per flush with `nspin` spinning CPUs (CPUs 1..nspin). */
static double ipi_probe_round(int nspin)
{
	pthread_t t[CPU_SETSIZE];
	atomic_store(&ipi_probe_stop, 0);
	atomic_store(&ipi_probe_ready, 0);
	for (int i = 0; i < nspin; i++)
		if (pthread_create(&t[i], NULL, ipi_probe_spin, (void *)(intptr_t)(i + 1)))
			die("ipi probe: pthread_create failed");
	while (atomic_load(&ipi_probe_ready) < nspin)
		sched_yield();
	uint64_t cpu0 = thread_cpu_ns();
	for (int r = 0; r < IPI_PROBE_ROUNDS; r++) {
		/* A written, writable PTE: making it read-only needs a flush. */
		ipi_probe_page[0] = (char)r;
		if (mprotect((void *)ipi_probe_page, PAGE, PROT_READ) != 0)
			die("ipi probe: mprotect: %s", strerror(errno));
		if (mprotect((void *)ipi_probe_page, PAGE, PROT_READ | PROT_WRITE) != 0)
			die("ipi probe: mprotect: %s", strerror(errno));
	}
	uint64_t spent = thread_cpu_ns() - cpu0;
	atomic_store(&ipi_probe_stop, 1);
	for (int i = 0; i < nspin; i++)
		pthread_join(t[i], NULL);
	return (double)spent / IPI_PROBE_ROUNDS;
}

static void ipi_probe(void)
{
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpus < 2)
		return;
	if (ncpus > CPU_SETSIZE)
		ncpus = CPU_SETSIZE;
	ipi_probe_page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ipi_probe_page == MAP_FAILED)
		die("ipi probe: mmap: %s", strerror(errno));
	ipi_probe_pin(0);
	int many = (int)ncpus - 1;
	double local = ipi_probe_round(0);
	double one = ipi_probe_round(1);
	double all = ipi_probe_round(many);
	char line[256];
	snprintf(line, sizeof line,
		 "{\"ipi_probe\":{\"rounds\":%d,\"local_ns\":%.1f,\"one_ns\":%.1f,\"many_ns\":%.1f,"
		 "\"many\":%d}}",
		 IPI_PROBE_ROUNDS, local, one, all, many);
	emit(line);
	munmap((void *)ipi_probe_page, PAGE);
	/* The workload's threads pin themselves; the main thread may run anywhere again. */
	cpu_set_t any;
	CPU_ZERO(&any);
	for (long c = 0; c < ncpus; c++)
		CPU_SET((size_t)c, &any);
	sched_setaffinity(0, sizeof any, &any);
}
