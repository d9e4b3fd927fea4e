/* llm_chat_parse_tool_calls and llm_chat_tool_format driven from C (C11):
 * each format's calls come back as the documented JSON; hostile text
 * (truncated JSON, deep nesting, invalid UTF-8, a bad format) gets a status
 * and a message; the output buffer protocol is that of llm_detokenize. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm.h"

static int g_failures = 0;
#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
      g_failures++;                                                              \
    }                                                                            \
  } while (0)

static char g_out[1 << 16];

/* Parses `text` in `format`; returns the status, the JSON in g_out (NUL-terminated). */
static llm_status parse(int32_t format, const char* text) {
  size_t n = 0;
  llm_status s = llm_chat_parse_tool_calls(format, text, strlen(text), g_out, sizeof g_out - 1, &n);
  g_out[s == LLM_OK ? n : 0] = '\0';
  return s;
}

static void expect(int32_t format, const char* text, const char* want) {
  llm_status s = parse(format, text);
  if (s != LLM_OK || strcmp(g_out, want) != 0) {
    fprintf(stderr, "format %d, text %s\n  status %s (%s)\n  got  %s\n  want %s\n", (int)format, text,
            llm_status_str(s), llm_last_error(), g_out, want);
    g_failures++;
  }
}

static void expect_error(int32_t format, const char* text, llm_status want, const char* in_message) {
  llm_status s = parse(format, text);
  if (s != want || strstr(llm_last_error(), in_message) == NULL) {
    fprintf(stderr, "format %d, text %.80s\n  status %s (%s), want %s with \"%s\"\n", (int)format, text,
            llm_status_str(s), llm_last_error(), llm_status_str(want), in_message);
    g_failures++;
  }
}

static void formats(void) {
  /* Qwen2.5 / Qwen3 / Hermes: several calls, text around them. */
  expect(LLM_TOOL_FORMAT_HERMES,
         "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n"
         "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>",
         "{\"content\":\"Let me check.\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\","
         "\"days\":3}},{\"name\":\"get_time\",\"arguments\":{\"tz\":\"CET\"}}]}");
  /* A reply cut at EOS before </tool_call> still holds a whole call. */
  expect(LLM_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": [1, 2.5, null, true]}}",
         "{\"content\":\"\",\"tool_calls\":[{\"name\":\"f\",\"arguments\":{\"x\":[1,2.5,null,true]}}]}");
  /* Braces inside strings do not end the call. */
  expect(LLM_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"echo\", \"arguments\": {\"s\": \"}{\\\"]\"}}</tool_call>",
         "{\"content\":\"\",\"tool_calls\":[{\"name\":\"echo\",\"arguments\":{\"s\":\"}{\\\"]\"}}]}");
  /* Llama 3.x: the JSON form with "parameters", with and without the tag. */
  expect(LLM_TOOL_FORMAT_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
         "{\"content\":\"\",\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}]}");
  expect(LLM_TOOL_FORMAT_LLAMA3,
         "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"k\": \"v\"}}",
         "{\"content\":\"\",\"tool_calls\":[{\"name\":\"a\",\"arguments\":{}},{\"name\":\"b\",\"arguments\":{\"k\":\"v\"}}]}");
  /* ... JSON that is not call-shaped is the answer itself. */
  expect(LLM_TOOL_FORMAT_LLAMA3, "{\"answer\": 42}", "{\"content\":\"{\\\"answer\\\": 42}\",\"tool_calls\":[]}");
  /* Mistral: the list form (ids kept) and the v11 name[ARGS] form. */
  expect(LLM_TOOL_FORMAT_MISTRAL,
         "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}, \"id\": \"abc123XYZ\"}]",
         "{\"content\":\"\",\"tool_calls\":[{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2},\"id\":\"abc123XYZ\"}]}");
  expect(LLM_TOOL_FORMAT_MISTRAL, "[TOOL_CALLS]add[ARGS]{\"a\": 1}[TOOL_CALLS]neg[ARGS]{\"x\": -0.5}",
         "{\"content\":\"\",\"tool_calls\":[{\"name\":\"add\",\"arguments\":{\"a\":1}},{\"name\":\"neg\",\"arguments\":"
         "{\"x\":-0.5}}]}");
  /* Generic: the shapes a JSON-constrained reply takes. */
  expect(LLM_TOOL_FORMAT_GENERIC, "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": \"{\\\"q\\\": 1}\"}]}",
         "{\"content\":\"\",\"tool_calls\":[{\"name\":\"f\",\"arguments\":{\"q\":1}}]}");
  expect(LLM_TOOL_FORMAT_GENERIC, " {\"tool_call\": {\"name\": \"f\", \"arguments\": {}}} ",
         "{\"content\":\"\",\"tool_calls\":[{\"name\":\"f\",\"arguments\":{}}]}");
  expect(LLM_TOOL_FORMAT_GENERIC, "{\"response\": \"Hi there\"}", "{\"content\":\"Hi there\",\"tool_calls\":[]}");
  expect(LLM_TOOL_FORMAT_GENERIC, "[not json", "{\"content\":\"[not json\",\"tool_calls\":[]}");
  /* AUTO picks the format by its marker; plain text is content. */
  expect(LLM_TOOL_FORMAT_AUTO, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
         "{\"content\":\"\",\"tool_calls\":[{\"name\":\"f\",\"arguments\":{}}]}");
  expect(LLM_TOOL_FORMAT_AUTO, "[TOOL_CALLS][{\"name\": \"g\", \"arguments\": {}}]",
         "{\"content\":\"\",\"tool_calls\":[{\"name\":\"g\",\"arguments\":{}}]}");
  expect(LLM_TOOL_FORMAT_AUTO, "Hello \"world\"\n\xc3\xa9", "{\"content\":\"Hello \\\"world\\\"\\n\xc3\xa9\",\"tool_calls\":[]}");
  expect(LLM_TOOL_FORMAT_AUTO, "", "{\"content\":\"\",\"tool_calls\":[]}");
}

static void hostile(void) {
  expect_error(LLM_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": ", LLM_ERR_INVALID_ARGUMENT,
               "truncated");
  expect_error(LLM_TOOL_FORMAT_HERMES, "<tool_call>{\"arguments\": {}}</tool_call>", LLM_ERR_INVALID_ARGUMENT, "name");
  expect_error(LLM_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>",
               LLM_ERR_INVALID_ARGUMENT, "arguments");
  expect_error(LLM_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"f\"} trailing", LLM_ERR_INVALID_ARGUMENT,
               "</tool_call>");
  expect_error(LLM_TOOL_FORMAT_MISTRAL, "[TOOL_CALLS]add{\"a\": 1}", LLM_ERR_INVALID_ARGUMENT, "[ARGS]");
  expect_error(LLM_TOOL_FORMAT_LLAMA3, "<|python_tag|>{\"name\": \"f\", \"parameters\": {", LLM_ERR_INVALID_ARGUMENT,
               "truncated");
  expect_error(LLM_TOOL_FORMAT_AUTO, "<tool_call>\xff\xfe</tool_call>", LLM_ERR_INVALID_UTF8, "UTF-8");
  expect_error(7, "text", LLM_ERR_INVALID_ARGUMENT, "format");
  expect_error(-1, "text", LLM_ERR_INVALID_ARGUMENT, "format");

  /* 100000 nested arrays: refused with a message, no stack overflow. */
  const size_t depth = 100000;
  char* deep = malloc(2 * depth + 64);
  CHECK(deep != NULL);
  if (deep != NULL) {
    size_t n = (size_t)sprintf(deep, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": ");
    for (size_t i = 0; i < depth; ++i) deep[n++] = '[';
    for (size_t i = 0; i < depth; ++i) deep[n++] = ']';
    strcpy(deep + n, "}}</tool_call>");
    expect_error(LLM_TOOL_FORMAT_HERMES, deep, LLM_ERR_INVALID_ARGUMENT, "byte 11");
    free(deep);
  }
}

static void buffer_protocol(void) {
  const char* text = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  const char* want = "{\"content\":\"\",\"tool_calls\":[{\"name\":\"f\",\"arguments\":{}}]}";
  size_t n = 0;
  CHECK(llm_chat_parse_tool_calls(LLM_TOOL_FORMAT_HERMES, text, strlen(text), NULL, 0, &n) == LLM_ERR_BUFFER_TOO_SMALL);
  CHECK(n == strlen(want));
  char small[8];
  CHECK(llm_chat_parse_tool_calls(LLM_TOOL_FORMAT_HERMES, text, strlen(text), small, sizeof small, &n) ==
        LLM_ERR_BUFFER_TOO_SMALL);
  CHECK(n == strlen(want));
  CHECK(llm_chat_parse_tool_calls(LLM_TOOL_FORMAT_HERMES, text, strlen(text), g_out, sizeof g_out, NULL) ==
        LLM_ERR_NULL_ARGUMENT);
  CHECK(llm_chat_parse_tool_calls(LLM_TOOL_FORMAT_HERMES, NULL, 3, g_out, sizeof g_out, &n) == LLM_ERR_NULL_ARGUMENT);
  CHECK(llm_chat_parse_tool_calls(LLM_TOOL_FORMAT_HERMES, text, strlen(text), NULL, 100, &n) == LLM_ERR_NULL_ARGUMENT);
  CHECK(llm_chat_parse_tool_calls(LLM_TOOL_FORMAT_AUTO, NULL, 0, g_out, sizeof g_out, &n) == LLM_OK);
  /* text_len, not a NUL, ends the text. */
  CHECK(llm_chat_parse_tool_calls(LLM_TOOL_FORMAT_GENERIC, "abcdef", 3, g_out, sizeof g_out, &n) == LLM_OK);
  CHECK(n == strlen("{\"content\":\"abc\",\"tool_calls\":[]}"));
}

static void detection(void) {
  llm_ctx* ctx = NULL;
  if (llm_ctx_create(NULL, &ctx) != LLM_OK) {
    fprintf(stderr, "skipping detection: no built-in model (%s)\n", llm_last_error());
    return;
  }
  int32_t f = -1;
  CHECK(llm_chat_tool_format(ctx, NULL, &f) == LLM_OK); /* stories260K: no template */
  CHECK(f == LLM_TOOL_FORMAT_GENERIC);
  CHECK(llm_chat_tool_format(ctx, "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}"
                                  "{% if tools %}<tool_call>{% endif %}", &f) == LLM_OK);
  CHECK(f == LLM_TOOL_FORMAT_HERMES);
  CHECK(llm_chat_tool_format(ctx, "{{ '[AVAILABLE_TOOLS]' }}{{ '[TOOL_CALLS]' }}", &f) == LLM_OK);
  CHECK(f == LLM_TOOL_FORMAT_MISTRAL);
  CHECK(llm_chat_tool_format(ctx, "{{ '<|python_tag|>' }}", &f) == LLM_OK);
  CHECK(f == LLM_TOOL_FORMAT_LLAMA3);
  CHECK(llm_chat_tool_format(ctx, "{{ messages }}", &f) == LLM_OK);
  CHECK(f == LLM_TOOL_FORMAT_GENERIC);
  CHECK(llm_chat_tool_format(ctx, NULL, NULL) == LLM_ERR_NULL_ARGUMENT);
  CHECK(llm_chat_tool_format(NULL, NULL, &f) == LLM_ERR_NULL_ARGUMENT);
  llm_ctx_destroy(ctx);
}

int main(void) {
  formats();
  hostile();
  buffer_protocol();
  detection();
  if (g_failures) {
    fprintf(stderr, "%d failure(s)\n", g_failures);
    return 1;
  }
  printf("ctest_tool_calls: all checks passed\n");
  return 0;
}
