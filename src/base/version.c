/* Version strings. */
#include "base/base.h"

extern const char *tdacl__git_revision_string;

const char *tdacl_version(void) { return TDACL_VERSION_STRING; }
const char *tdacl_git_revision(void) { return tdacl__git_revision_string; }
