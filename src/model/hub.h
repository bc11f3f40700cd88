/* Model directories named as Hugging Face repo ids, resolved offline in the local hub cache. */
#ifndef TDACL_HUB_H
#define TDACL_HUB_H

#include <stddef.h>

#include "base/base.h"

/* The directory `spec` names: spec itself when it is a directory; else, when it reads as a
 * repo id ("name" or "org/name"), its snapshot in the hub cache ($HF_HUB_CACHE, else
 * $HF_HOME/hub, else ~/.cache/huggingface/hub): models--org--name/snapshots/<rev>, rev from
 * refs/main, else the only snapshot, else the newest.  Never downloads.  The error names
 * every place looked at. */
tdacl_status tdacl__resolve_model_dir(const char *spec, char *out, size_t n);

#endif
