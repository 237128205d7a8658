
/* ---- the sampler's /proc/zoneinfo reader (appended after the runtime by sampler.rs) ---- */

/* lowmem_reserve entries kept per zone (MAX_NR_ZONES is at most 6 upstream). */
#define ZI_MAXPROT 8

/* One zone as zoneinfo_show_print (mm/vmstat.c) prints it; -1: the line was absent. */
struct zi_zone {
	int node;
	char name[32];
	long long free, min, low, high, promo, present, managed;
	long long prot[ZI_MAXPROT];
	int nprot;
};

static void zi_reset(struct zi_zone *z)
{
	memset(z, 0, sizeof *z);
	z->node = -1;
	z->free = z->min = z->low = z->high = z->promo = z->present = z->managed = -1;
}

static void sb_opt(struct sb *b, const char *key, long long v)
{
	if (v < 0)
		sb_printf(b, ",\"%s\":null", key);
	else
		sb_printf(b, ",\"%s\":%lld", key, v);
}

/* Append the zone as a JSON object if it is populated (present pages, or unknown). */
static void zi_flush(struct sb *b, const struct zi_zone *z, int *count)
{
	if (z->node < 0 || z->present == 0)
		return;
	sb_printf(b, "%s{\"node\":%d,\"zone\":\"", *count ? "," : "", z->node);
	sb_json_str(b, z->name);
	sb_printf(b, "\"");
	sb_opt(b, "free", z->free);
	sb_opt(b, "min", z->min);
	sb_opt(b, "low", z->low);
	sb_opt(b, "high", z->high);
	sb_opt(b, "promo", z->promo);
	sb_opt(b, "managed", z->managed);
	sb_printf(b, ",\"protection\":[");
	for (int i = 0; i < z->nprot; i++)
		sb_printf(b, "%s%lld", i ? "," : "", z->prot[i]);
	sb_printf(b, "]}");
	(*count)++;
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

/* Per node and populated zone of a /proc/zoneinfo text: free pages, the min/low/high/promo
 * watermarks, managed pages and the protection array (lowmem_reserve), as a JSON array. Lines
 * it does not know are skipped, so a kernel with more or fewer lines still parses. */
static void sb_zoneinfo(struct sb *b, const char *text)
{
	struct zi_zone z;
	zi_reset(&z);
	int count = 0, in_pagesets = 0;
	sb_printf(b, "[");
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char line[256];
		if (len >= sizeof line)
			len = sizeof line - 1;
		memcpy(line, l, len);
		line[len] = '\0';
		l = nl ? nl + 1 : NULL;
		const char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		int node;
		char name[32];
		if (sscanf(p, "Node %d, zone %31s", &node, name) == 2) {
			zi_flush(b, &z, &count);
			zi_reset(&z);
			z.node = node;
			memcpy(z.name, name, sizeof name);
			in_pagesets = 0;
			continue;
		}
		/* The per-CPU pagesets have "high:" lines of their own: stop looking there. */
		if (z.node < 0 || in_pagesets)
			continue;
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
	zi_flush(b, &z, &count);
	sb_printf(b, "]");
}
