/* C access to the text objects of the `dga` module (bindings/l_text.c), for other binding
 * files that take or return a tokenizer (the domain store, MMLU scoring). */
#ifndef DGAL_TEXT_H
#define DGAL_TEXT_H

#include "bpe.h"
#include "dgal.h"
#include "jsonl.h"

#define DGAL_TOKENIZER "dga.tokenizer"
#define DGAL_TEXT_READER "dga.text_reader"

/* The tokenizer at idx (a Lua error if it is not a dga.tokenizer or is closed). The Lua value
 * keeps ownership: do not free it, and keep the value alive while you use the pointer. */
dga_bpe *dgal_check_tokenizer(lua_State *L, int idx);

/* Pushes a new dga.tokenizer that takes ownership of tok (freed by its __gc/__close). */
void dgal_push_tokenizer(lua_State *L, dga_bpe *tok);

/* Pushes a reader's counters as a table {files=, lines=, docs=, bytes=, blank=, bad_json=,
 * not_object=, no_text=, bad_utf8=, skipped=, messages = {"file:line: reason", ...}}. */
void dgal_push_text_stats(lua_State *L, const dga_text_stats *s);

#endif
