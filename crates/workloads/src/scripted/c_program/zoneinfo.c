
/* ---- the sampler's zone reader (appended after the runtime by sampler.rs) ----
 *
 * /proc/zoneinfo is read at the first and the last sample only: the kernel prints it with each
 * zone's lock held and interrupts off (walk_zones_in_node), ~150 lines per zone, and reading
 * it every 100 ms changed the guest's NUMA balancing by 4x. The samples in between take each
 * zone's free pages from /proc/buddyinfo (one short line per zone, no per-CPU list counts)
 * and keep the watermarks, managed pages and protection of the last zoneinfo read, which
 * only change on a sysctl write or a watermark boost. */

/* Zones and lowmem_reserve entries kept (MAX_NR_ZONES is at most 6 upstream). */
#define ZI_MAXZONES 64
#define ZI_MAXPROT 8

/* One zone as zoneinfo_show_print (mm/vmstat.c) prints it; -1: the line was absent. */
struct zi_zone {
	int node;
	char name[32];
	long long free, min, low, high, promo, present, managed;
	long long pcp;      /* pages on the per-CPU lists (the pagesets' counts), not in free */
	long long pcp_high; /* the per-CPU lists' high limits, summed over CPUs */
	long long prot[ZI_MAXPROT];
	int nprot;
};

/* The populated zones of the last zoneinfo read (-1: never read; 0 zones: unreadable). */
static struct zi_zone zi_zones[ZI_MAXZONES];
static int zi_count = -1;

static void zi_reset(struct zi_zone *z)
{
	memset(z, 0, sizeof *z);
	z->node = -1;
	z->free = z->min = z->low = z->high = z->promo = z->present = z->managed = z->pcp = z->pcp_high = -1;
}

/* Keep the zone if it is populated (present pages, or unknown) and there is room. */
static void zi_keep(const struct zi_zone *z)
{
	if (z->node >= 0 && z->present != 0 && zi_count < ZI_MAXZONES)
		zi_zones[zi_count++] = *z;
}

/* `line` (leading blanks skipped) is `key` then blanks then a number: store it in *v. */
static int zi_field(const char *line, const char *key, long long *v)
{
	size_t n = strlen(key);
	if (strncmp(line, key, n) != 0 || (line[n] != ' ' && line[n] != '\t'))
		return 0;
	char *e;
	long long x = strtoll(line + n, &e, 10);
	if (e != line + n)
		*v = x;
	return 1;
}

/* The next line of `*text` into `line` (truncated to its size), blanks skipped; NULL at the end. */
static const char *zi_line(const char **text, char *line, size_t size)
{
	const char *l = *text;
	if (!l || !*l)
		return NULL;
	const char *nl = strchr(l, '\n');
	size_t len = nl ? (size_t)(nl - l) : strlen(l);
	if (len >= size)
		len = size - 1;
	memcpy(line, l, len);
	line[len] = '\0';
	*text = nl ? nl + 1 : NULL;
	const char *p = line;
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* Parse a /proc/zoneinfo text into zi_zones. Lines it does not know are skipped, so a kernel
 * with more or fewer lines still parses. */
static void zi_parse(const char *text)
{
	struct zi_zone z;
	zi_reset(&z);
	zi_count = 0;
	int in_pagesets = 0;
	char line[256];
	for (const char *p; (p = zi_line(&text, line, sizeof line));) {
		int node;
		char name[32];
		if (sscanf(p, "Node %d, zone %31s", &node, name) == 2) {
			zi_keep(&z);
			zi_reset(&z);
			z.node = node;
			memcpy(z.name, name, sizeof name);
			in_pagesets = 0;
			continue;
		}
		if (z.node < 0)
			continue;
		/* The per-CPU pagesets have "high:" lines of their own: only their counts matter. */
		if (in_pagesets) {
			long long n = -1;
			if (zi_field(p, "count:", &n) && n >= 0)
				z.pcp = (z.pcp < 0 ? 0 : z.pcp) + n;
			else if (zi_field(p, "high:", &n) && n >= 0)
				z.pcp_high = (z.pcp_high < 0 ? 0 : z.pcp_high) + n;
			continue;
		}
		if (strcmp(p, "pagesets") == 0) {
			in_pagesets = 1;
			continue;
		}
		if (strncmp(p, "pages free", 10) == 0) {
			zi_field(p + 6, "free", &z.free);
			continue;
		}
		if (strncmp(p, "protection:", 11) == 0) {
			const char *q = strchr(p, '(');
			while (q && *q && *q != ')' && z.nprot < ZI_MAXPROT) {
				char *e;
				long long x = strtoll(q + 1, &e, 10);
				if (e == q + 1)
					break;
				z.prot[z.nprot++] = x;
				q = e;
			}
			continue;
		}
		if (zi_field(p, "min", &z.min) || zi_field(p, "low", &z.low) ||
		    zi_field(p, "high", &z.high) || zi_field(p, "promo", &z.promo) ||
		    zi_field(p, "present", &z.present) || zi_field(p, "managed", &z.managed))
			continue;
	}
	zi_keep(&z);
}

/* Each known zone's free pages from a /proc/buddyinfo text (free blocks per order); -1 for a
 * zone the text does not list. */
static void zi_buddy(const char *text)
{
	for (int i = 0; i < zi_count; i++)
		zi_zones[i].free = zi_zones[i].pcp = zi_zones[i].pcp_high = -1;
	char line[512];
	for (const char *p; (p = zi_line(&text, line, sizeof line));) {
		int node, at = 0;
		char name[32];
		if (sscanf(p, "Node %d, zone %31s %n", &node, name, &at) != 2 || at == 0)
			continue;
		long long pages = 0;
		const char *q = p + at;
		for (int order = 0; order < 20; order++) {
			char *e;
			long long n = strtoll(q, &e, 10);
			if (e == q)
				break;
			pages += n << order;
			q = e;
		}
		for (int i = 0; i < zi_count; i++)
			if (zi_zones[i].node == node && strcmp(zi_zones[i].name, name) == 0)
				zi_zones[i].free = pages;
	}
}

static void sb_opt(struct sb *b, const char *key, long long v)
{
	if (v < 0)
		sb_printf(b, ",\"%s\":null", key);
	else
		sb_printf(b, ",\"%s\":%lld", key, v);
}

/* `text`, read from the file named by environment variable `env` or else `path`. */
static char *zi_read(const char *env, const char *path)
{
	const char *p = getenv(env);
	return read_file(p && *p ? p : path);
}

/* The zones' JSON array: zoneinfo on a `full` sample (and until it was read once), else the
 * kept zones with free pages from buddyinfo; `null` when zoneinfo could not be read.
 * TIERLAB_ZONEINFO and TIERLAB_BUDDYINFO name other files (the tests' sample texts). */
static void sb_zones(struct sb *b, int full)
{
	if (full || zi_count < 0) {
		char *zi = zi_read("TIERLAB_ZONEINFO", "/proc/zoneinfo");
		if (!zi) {
			zi_count = -1;
			sb_printf(b, "null");
			return;
		}
		zi_parse(zi);
		free(zi);
	} else {
		char *bi = zi_read("TIERLAB_BUDDYINFO", "/proc/buddyinfo");
		zi_buddy(bi ? bi : "");
		free(bi);
	}
	sb_printf(b, "[");
	for (int i = 0; i < zi_count; i++) {
		const struct zi_zone *z = &zi_zones[i];
		sb_printf(b, "%s{\"node\":%d,\"zone\":\"", i ? "," : "", z->node);
		sb_json_str(b, z->name);
		sb_printf(b, "\"");
		sb_opt(b, "free", z->free);
		sb_opt(b, "min", z->min);
		sb_opt(b, "low", z->low);
		sb_opt(b, "high", z->high);
		sb_opt(b, "promo", z->promo);
		sb_opt(b, "managed", z->managed);
		sb_opt(b, "pcp", z->pcp);
		sb_opt(b, "pcp_high", z->pcp_high);
		sb_printf(b, ",\"protection\":[");
		for (int k = 0; k < z->nprot; k++)
			sb_printf(b, "%s%lld", k ? "," : "", z->prot[k]);
		sb_printf(b, "]}");
	}
	sb_printf(b, "]");
}
