/*
 * controller/io/xml_tree.h: an XML answer as a small tree, for the readers
 * of AWS answers (providers/aws/ec2_xml.c, io/s3.c).
 *
 * It lives in io/ because both the aws provider and the controller's S3
 * client read it, and core/ does not link expat.
 *
 * expat streams; EC2 answers nest the same element names at several
 * depths, so the readers first build this tree (a flat array of nodes,
 * text in one buffer), then walk it by exact paths.  The tree has limits
 * (depth, nodes, text) so that a hostile answer costs bounded memory, and
 * any DOCTYPE or entity declaration is refused.  Element names are local
 * names (namespace prefixes dropped).  Node indices are ints, -1 for none.
 */
#ifndef TM_IO_XML_TREE_H
#define TM_IO_XML_TREE_H

#include <stddef.h>

#include <expat.h>

struct tm_xnode {
    size_t name;                  /* offset into text */
    size_t text;                  /* offset of the character data, 0 = none */
    size_t text_len;
    int parent, first, last, next;/* indices; -1 = none */
};

struct tm_xdoc {
    struct tm_xnode *nodes;
    size_t n, cap;
    char *text;                   /* names and texts, each NUL-terminated */
    size_t len, tcap;
    int cur;                      /* open element, -1 before the root */
    int depth;
    const char *fail;             /* why we stopped the parser, else NULL */
    XML_Parser parser;
};

/* Parse body into d; < 0 (TM_EBADREPLY, TM_ENOMEM) with err saying why,
 * d then released.  Release a parsed d with tm_xdoc_release(). */
int tm_xdoc_parse(struct tm_xdoc *d, const char *body, size_t len, char *err, size_t errsize);
void tm_xdoc_release(struct tm_xdoc *d);

/* Element i's name, and its text ("" when none). */
const char *tm_xdoc_name(const struct tm_xdoc *d, int i);
const char *tm_xdoc_text(const struct tm_xdoc *d, int i);
/* parent's first child called name, and the element at "a/b/c" below
 * parent (-1 when none); that element's text ("" when none). */
int tm_xdoc_child(const struct tm_xdoc *d, int parent, const char *name);
int tm_xdoc_path(const struct tm_xdoc *d, int parent, const char *path);
const char *tm_xdoc_get(const struct tm_xdoc *d, int parent, const char *path);
/* Copy path's text into a fixed field: < 0 when too long (a bad reply);
 * the _cut form cuts what does not fit (messages, descriptions). */
int tm_xdoc_copy(const struct tm_xdoc *d, int parent, const char *path, char *dst, size_t size);
void tm_xdoc_copy_cut(const struct tm_xdoc *d, int parent, const char *path, char *dst,
                      size_t size);
/* The <item> children of a set: how many, the first, the one after item
 * (-1 at the end). */
size_t tm_xdoc_count_items(const struct tm_xdoc *d, int set);
int tm_xdoc_first_item(const struct tm_xdoc *d, int set);
int tm_xdoc_next_item(const struct tm_xdoc *d, int item);

#endif
