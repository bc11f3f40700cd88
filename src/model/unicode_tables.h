/* Unicode classes of the GPT-2 pre-tokenizer (src/model/tokenizer.c). */
#ifndef TDACL_UNICODE_TABLES_H
#define TDACL_UNICODE_TABLES_H

#include <stddef.h>
#include <stdint.h>

/* General category L* (letters) and N* (numbers); generated tables. */
int tdacl__unicode_is_letter(uint32_t cp);
int tdacl__unicode_is_number(uint32_t cp);

#endif
