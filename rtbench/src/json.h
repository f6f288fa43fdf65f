/* rtbench - a minimal streaming JSON writer (2-space indentation). */
#ifndef RTBENCH_JSON_H
#define RTBENCH_JSON_H

#include <stdint.h>
#include <stdio.h>

#define RB_JSON_MAXDEPTH 16

struct rb_json {
	FILE *f;
	int depth;
	int count[RB_JSON_MAXDEPTH];	/* members written at each depth */
};

void rb_json_init(struct rb_json *j, FILE *f);
/* key is NULL for the root value and for array elements */
void rb_json_obj_begin(struct rb_json *j, const char *key);
void rb_json_obj_end(struct rb_json *j);
void rb_json_arr_begin(struct rb_json *j, const char *key);
void rb_json_arr_end(struct rb_json *j);
void rb_json_int(struct rb_json *j, const char *key, int64_t v);
void rb_json_uint(struct rb_json *j, const char *key, uint64_t v);
void rb_json_double(struct rb_json *j, const char *key, double v, int prec);
void rb_json_str(struct rb_json *j, const char *key, const char *s);
void rb_json_bool(struct rb_json *j, const char *key, int v);
void rb_json_null(struct rb_json *j, const char *key);
/* Write s as a JSON string literal (with quotes) */
void rb_json_escape(FILE *f, const char *s);

#endif
