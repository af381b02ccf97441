/*
 * admin_page.h -- the admin port's page (GET /), built into the binary.
 *
 * src/core/admin_page.html, turned into a C string at build time
 * (Makefile.am): one self-contained page, its charts drawn in SVG by its
 * own script from /stats and /stats/history, nothing loaded from
 * anywhere else, so it works offline and behind a tunnel.
 */
#ifndef SC_ADMIN_PAGE_H
#define SC_ADMIN_PAGE_H

#include <stddef.h>

extern const char   admin_page_html[];
extern const size_t admin_page_len;

#endif
