/* rtbench - minimal streaming JSON writer. */
#include "json.h"

#include <math.h>

void rb_json_init(struct rb_json *j, FILE *f)
{
	j->f = f;
	j->depth = 0;
	j->count[0] = 0;
}

void rb_json_escape(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");

	fputc('"', f);
	for (; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

static void indent(struct rb_json *j)
{
	int i;

	for (i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

/* separator, newline, indentation and key of the next member */
static void member(struct rb_json *j, const char *key)
{
	if (j->depth > 0) {
		if (j->count[j->depth]++)
			fputc(',', j->f);
		fputc('\n', j->f);
		indent(j);
	}
	if (key) {
		rb_json_escape(j->f, key);
		fputs(": ", j->f);
	}
}

static void open_(struct rb_json *j, const char *key, char c)
{
	member(j, key);
	fputc(c, j->f);
	if (j->depth + 1 < RB_JSON_MAXDEPTH)
		j->depth++;
	j->count[j->depth] = 0;
}

static void close_(struct rb_json *j, char c)
{
	int had = j->count[j->depth];

	if (j->depth > 0)
		j->depth--;
	if (had) {
		fputc('\n', j->f);
		indent(j);
	}
	fputc(c, j->f);
	if (j->depth == 0)
		fputc('\n', j->f);
}

void rb_json_obj_begin(struct rb_json *j, const char *key)
{
	open_(j, key, '{');
}

void rb_json_obj_end(struct rb_json *j)
{
	close_(j, '}');
}

void rb_json_arr_begin(struct rb_json *j, const char *key)
{
	open_(j, key, '[');
}

void rb_json_arr_end(struct rb_json *j)
{
	close_(j, ']');
}

void rb_json_int(struct rb_json *j, const char *key, int64_t v)
{
	member(j, key);
	fprintf(j->f, "%lld", (long long)v);
}

void rb_json_uint(struct rb_json *j, const char *key, uint64_t v)
{
	member(j, key);
	fprintf(j->f, "%llu", (unsigned long long)v);
}

void rb_json_double(struct rb_json *j, const char *key, double v, int prec)
{
	member(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.*f", prec, v);
	else
		fputs("null", j->f);
}

void rb_json_str(struct rb_json *j, const char *key, const char *s)
{
	member(j, key);
	rb_json_escape(j->f, s);
}

void rb_json_bool(struct rb_json *j, const char *key, int v)
{
	member(j, key);
	fputs(v ? "true" : "false", j->f);
}

void rb_json_null(struct rb_json *j, const char *key)
{
	member(j, key);
	fputs("null", j->f);
}
