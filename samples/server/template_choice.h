// What llm-server's --chat-template and --chat-template-file mean, as
// llama-server reads them: --chat-template-file names a Jinja file;
// --chat-template is the name of a common format ("chatml", "llama3") or
// the Jinja text itself (an existing file's path is still read,
// as earlier llm-server versions did).
#pragma once

#include <string>

namespace server {

// The template text for the flag's value; false with *error when a file
// cannot be read.
bool ResolveChatTemplate(const std::string& value, bool is_file, std::string* text, std::string* error);

}  // namespace server
