/* web: the built-in web console — static assets compiled into the binary (generated from web/
 * by tools/embed_assets.py) served with ETags and a strict CSP, and GET /info (model facts). */
#ifndef SD_WEB_H
#define SD_WEB_H

#include <stddef.h>

#include <microhttpd.h>

#include "server/http.h"

/* One embedded file; `path` is "/app.js", `etag` a quoted content hash. */
typedef struct sd_web_asset {
    const char *path;
    const char *ctype;
    const char *etag;
    const unsigned char *data; /* [len] */
    size_t len;
} sd_web_asset;

/* Defined by the generated $(BUILD)/gen/web_assets.c. */
extern const sd_web_asset sd_web_assets[];
extern const int sd_web_n_assets;

/* The asset for a request path ("/" is /index.html), or NULL. */
const sd_web_asset *sd_web_find(const char *url);

/* The response to a GET of asset `a`: 304 (empty) when `if_none_match` names its ETag, else 200
 * with the bytes; both carry the caching and security headers. NULL on allocation failure. */
struct MHD_Response *sd_web_asset_response(const sd_web_asset *a, const char *if_none_match, int *ret_status);

struct sd_http__conn;
/* Answers GET/HEAD of the console's paths (when enabled in the options) and of /info. Returns
 * 1 with *ret set when it answered, 0 when `c`'s URL is none of them. */
int sd_web_handle(sd_http *h, struct MHD_Connection *conn, struct sd_http__conn *c, enum MHD_Result *ret);

#endif
