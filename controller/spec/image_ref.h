/*
 * controller/spec/image_ref.h: whether a job's `image` is a container image
 * reference, by the OCI distribution grammar (the reference regular
 * expression of distribution/reference, which docker and podman parse
 * with): [DOMAIN[:PORT]/]PATH[:TAG][@DIGEST], the path in lower case,
 * ASCII only, the name (domain and path) at most 255 bytes.
 *
 * The node agent puts the image into a shell command line (quoted) after
 * the runtime's options, so a value the runtime could read as an option
 * ("--privileged", "-v/:/host") must never pass: no reference starts with
 * '-', and none holds a space, a quote or a byte outside ASCII.
 */
#ifndef TM_SPEC_IMAGE_REF_H
#define TM_SPEC_IMAGE_REF_H

#include <stdbool.h>

#define TM_IMAGE_NAME_MAX 255 /* bytes of the name, as distribution/reference bounds it */

/* 1 when s is a reference, 0 when it is not; TM_ENOMEM when the pattern
 * could not be compiled (never with a working libc). */
int tm_image_ref_check(const char *s);

#endif
