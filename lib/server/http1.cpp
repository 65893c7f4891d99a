#include "server/http1.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <utility>

namespace server::http1 {
namespace {

constexpr std::uint64_t kHuge = std::numeric_limits<std::uint64_t>::max();
constexpr std::size_t kMaxChunkLine = 1024;

// RFC 9110 tchar.
bool is_tchar(unsigned char c) {
  if (c >= '0' && c <= '9') {
    return true;
  }
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') {
    return true;
  }
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return is_tchar(static_cast<unsigned char>(c)); });
}

// VCHAR, obs-text, SP and HTAB: what a field value may carry.
bool is_field_char(unsigned char c) { return c == '\t' || c == ' ' || (c > 0x20 && c != 0x7f); }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == y; });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string lowered(std::string_view s) {
  std::string out(trim(s));
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

void append_list(std::string& list, std::string_view value) {
  if (!list.empty()) {
    list += ',';
  }
  list += value;
}

// One element of a Content-Length list: digits, saturating at kHuge (still a valid length, just
// too large). nullopt when not digits.
std::optional<std::uint64_t> parse_length(std::string_view text) {
  text = trim(text);
  if (text.empty()) {
    return std::nullopt;
  }
  std::uint64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    auto digit = static_cast<std::uint64_t>(c - '0');
    n = n > (kHuge - digit) / 10 ? kHuge : n * 10 + digit;
  }
  return n;
}

bool has_token(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    std::size_t comma = list.find(',');
    if (iequals(trim(list.substr(0, comma)), token)) {
      return true;
    }
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return false;
}

constexpr std::array<std::string_view, 7> kMethods = {"GET",    "HEAD",  "POST",   "PUT",
                                                      "DELETE", "PATCH", "OPTIONS"};

}  // namespace

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Content";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : "Error";
  }
}

void write_response_head(std::string& out, const ResponseHead& head, std::time_t now) {
  // The Date line, formatted once a second per thread.
  thread_local std::time_t cached = -1;
  thread_local std::array<char, 64> date{};
  if (now != cached) {
    cached = now;
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(date.data(), date.size(), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
  }
  out.append("HTTP/1.1 ").append(std::to_string(head.status)).append(" ");
  out.append(reason_phrase(head.status)).append("\r\nContent-Type: ");
  out.append(head.content_type).append("\r\nContent-Length: ");
  out.append(std::to_string(head.content_length)).append("\r\n").append(date.data());
  if (head.allow_post) {
    out += "Allow: POST\r\n";
  }
  out += head.close ? "Connection: close\r\n\r\n" : "\r\n";
}

void RequestParser::reset() {
  // Swapped with a fresh parser rather than assigned one: a string assigned a short one keeps its
  // buffer, and a connection kept alive would hold on to its last request's body.
  RequestParser fresh(limits_);
  std::swap(*this, fresh);
}

std::size_t RequestParser::body_remaining() const {
  if (state_ != State::kBody || head_.chunked || !head_.content_length) {
    return 0;
  }
  return static_cast<std::size_t>(*head_.content_length) - body_.size();
}

void RequestParser::reserve_body() {
  if (head_.content_length && !head_.body_too_large) {
    body_.reserve(static_cast<std::size_t>(*head_.content_length));
  }
}

bool RequestParser::fail(int status, std::string message) {
  state_ = State::kError;
  error_ = {status, std::move(message)};
  return false;
}

std::size_t RequestParser::feed(std::string_view data) {
  std::size_t used = 0;
  if (state_ == State::kHead) {  // stops where the head ends: the caller acts on it first
    while (used < data.size() && state_ == State::kHead) {
      used += feed_head(data.substr(used));
    }
  } else {
    while (used < data.size() && state_ == State::kBody) {
      used += feed_body(data.substr(used));
    }
  }
  return used;
}

// Lines of the head, each checked as soon as its LF arrives; the limits are checked on every
// byte received, so a head that never ends is refused once it is too long.
std::size_t RequestParser::feed_head(std::string_view data) {
  bool has_lf = false;
  std::size_t take = line_extent(data, has_lf);
  std::size_t line_bytes = line_.size() + take;
  // A request line over both limits is refused for the one it crosses first, the smaller, so the
  // answer does not depend on how its bytes arrive.
  bool line_limit_first = limits_.max_request_line + 2 < limits_.max_head_bytes;
  if (!saw_request_line_ && line_limit_first && line_bytes > limits_.max_request_line + 2) {
    fail(414,
         "the request line is longer than " + std::to_string(limits_.max_request_line) + " bytes");
    return take;
  }
  if (head_bytes_ + line_bytes > limits_.max_head_bytes) {
    fail(431, "the request head is longer than " + std::to_string(limits_.max_head_bytes) +
                  " bytes (--max-header-bytes)");
    return take;
  }
  line_.append(data.data(), has_lf ? take - 1 : take);
  if (!has_lf) {
    return take;
  }
  head_bytes_ += line_.size() + 1;
  if (end_line("a line of the request head ends in a bare LF; HTTP lines end in CRLF")) {
    take_line(line_);
  }
  line_.clear();  // its buffer stays, for the next line
  return take;
}

std::size_t RequestParser::line_extent(std::string_view data, bool& has_lf) {
  const void* lf = std::memchr(data.data(), '\n', data.size());
  has_lf = lf != nullptr;
  return has_lf ? static_cast<std::size_t>(static_cast<const char*>(lf) - data.data()) + 1
                : data.size();
}

bool RequestParser::end_line(std::string_view bare_lf) {
  if (line_.empty() || line_.back() != '\r') {
    return fail(400, std::string(bare_lf));
  }
  line_.pop_back();
  return true;
}

void RequestParser::take_line(std::string_view line) {
  if (line.find('\r') != std::string_view::npos) {
    fail(400, "a CR inside a line of the request head");
    return;
  }
  if (!saw_request_line_) {
    if (!line.empty()) {  // empty lines before the request line are ignored (RFC 9112 2.2)
      saw_request_line_ = true;
      parse_request_line(line);
    }
    return;
  }
  if (line.empty()) {
    finish_head();
    return;
  }
  parse_header(line);
}

bool RequestParser::parse_request_line(std::string_view line) {
  std::size_t sp1 = line.find(' ');
  std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return fail(400, "malformed request line; expected METHOD TARGET HTTP/1.1");
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) {
    return fail(400, "malformed request line: the method is not a token");
  }
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  bool http11_shape = version.size() == 8 && version.starts_with("HTTP/") && digit(version[5]) &&
                      version[6] == '.' && digit(version[7]);
  if (!http11_shape) {
    // "HTTP/2", "HTTP/3": another protocol's version, not a malformed line
    bool other = version.size() == 6 && version.starts_with("HTTP/") && digit(version[5]) &&
                 version[5] != '1';
    return other ? fail(505, "HTTP version " + std::string(version.substr(5)) +
                                 " is not supported; send HTTP/1.1")
                 : fail(400, "malformed request line: the version is not HTTP/1.1");
  }
  if (version[5] != '1') {
    return fail(
        505, "HTTP version " + std::string(version.substr(5)) + " is not supported; send HTTP/1.1");
  }
  head_.minor_version = version[7] == '0' ? 0 : 1;
  head_.keep_alive = head_.minor_version == 1;
  if (std::find(kMethods.begin(), kMethods.end(), method) == kMethods.end()) {
    return fail(501, "method " + std::string(method) + " is not implemented; send POST");
  }
  head_.method = std::string(method);
  if (target.empty() ||
      !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    return fail(400, "malformed request target");
  }
  if (target == "*" && method == "OPTIONS") {  // asterisk-form (RFC 9112 3.2.4)
    head_.path = "*";
    return true;
  }
  if (target.front() != '/') {
    // absolute-form: scheme "://" authority path (RFC 9112 3.2.2)
    std::size_t scheme_end = target.find("://");
    std::string scheme = lowered(target.substr(0, scheme_end));
    if (scheme_end == std::string_view::npos || (scheme != "https" && scheme != "http")) {
      return fail(400, "malformed request target; expected a path such as /mutate");
    }
    std::string_view rest = target.substr(scheme_end + 3);
    std::size_t path_start = rest.find_first_of("/?");
    if (path_start == 0 || rest.empty()) {
      return fail(400, "malformed request target: no host in the absolute URI");
    }
    target = path_start == std::string_view::npos ? "/" : rest.substr(path_start);
    if (target.front() == '?') {
      target = "/";
    }
  }
  head_.path = std::string(target.substr(0, target.find('?')));
  return true;
}

bool RequestParser::parse_header(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') {
    return fail(400,
                "a folded header line (obs-fold) is not accepted; send each header on one line");
  }
  if (++header_count_ > limits_.max_headers) {
    return fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
  }
  std::size_t colon = line.find(':');
  std::string_view name = line.substr(0, colon);
  if (colon == std::string_view::npos || !is_token(name)) {
    return fail(400, "malformed header line; expected Name: value with no space before the colon");
  }
  std::string_view value = trim(line.substr(colon + 1));
  if (!std::all_of(value.begin(), value.end(),
                   [](char c) { return is_field_char(static_cast<unsigned char>(c)); })) {
    return fail(400, "control characters in the value of header " + std::string(name));
  }
  if (iequals(name, "content-length")) {
    std::string_view list = value;
    do {
      std::size_t comma = list.find(',');
      std::optional<std::uint64_t> n = parse_length(list.substr(0, comma));
      if (!n || (head_.content_length && *head_.content_length != *n)) {
        return fail(400, n ? "conflicting Content-Length values"
                           : "Content-Length is not a number of bytes");
      }
      head_.content_length = n;
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    } while (!list.empty());
  } else if (iequals(name, "transfer-encoding")) {
    has_transfer_encoding_ = true;
    append_list(transfer_encoding_, value);
  } else if (iequals(name, "host")) {
    ++host_count_;
  } else if (iequals(name, "content-type")) {
    head_.content_type = std::string(value);
  } else if (iequals(name, "content-encoding")) {
    append_list(content_encoding_, value);
  } else if (iequals(name, "expect")) {
    append_list(expect_, value);
  } else if (iequals(name, "connection")) {
    append_list(connection_, value);
  }
  return true;
}

bool RequestParser::finish_head() {
  if (host_count_ > 1 || (head_.minor_version == 1 && host_count_ == 0)) {
    return fail(400, host_count_ == 0 ? "an HTTP/1.1 request needs a Host header"
                                      : "more than one Host header");
  }
  if (has_transfer_encoding_) {
    if (head_.content_length) {
      return fail(400, "Transfer-Encoding together with Content-Length; send one of them");
    }
    if (head_.minor_version == 0) {
      return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    }
    if (lowered(transfer_encoding_) != "chunked") {
      return fail(501, "Transfer-Encoding " + std::string(trim(transfer_encoding_)) +
                           " is not implemented; send Content-Length or chunked");
    }
    head_.chunked = true;
  }
  std::string encoding = lowered(content_encoding_);
  if (!encoding.empty() && encoding != "identity") {
    return fail(415, "Content-Encoding " + std::string(trim(content_encoding_)) +
                         " is not accepted; send the body uncompressed");
  }
  std::string expect = lowered(expect_);
  if (!expect.empty() && expect != "100-continue") {
    return fail(417, "Expect " + std::string(trim(expect_)) + " is not supported");
  }
  head_.expect_continue = !expect.empty() && head_.minor_version == 1;  // RFC 9110 10.1.1
  if (has_token(connection_, "close")) {
    head_.keep_alive = false;
  } else if (head_.minor_version == 0) {
    head_.keep_alive = has_token(connection_, "keep-alive");
  }
  if (head_.content_length && *head_.content_length > limits_.max_body_bytes) {
    head_.body_too_large = true;
    return fail(413, "request body is larger than " + std::to_string(limits_.max_body_bytes) +
                         " bytes (--max-body-bytes)");
  }
  bool body = head_.chunked || (head_.content_length && *head_.content_length > 0);
  state_ = body ? State::kBody : State::kDone;
  return true;
}

std::size_t RequestParser::feed_body(std::string_view data) {
  if (head_.chunked) {
    return feed_chunked(data);
  }
  std::size_t take = std::min(body_remaining(), data.size());
  body_.append(data.data(), take);
  if (body_remaining() == 0) {
    state_ = State::kDone;
  }
  return take;
}

// The chunked coding (RFC 9112 7.1): size lines and trailers share the head's byte limit.
std::size_t RequestParser::feed_chunked(std::string_view data) {
  if (chunk_ == Chunk::kData) {
    std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_left_, data.size()));
    body_.append(data.data(), take);
    chunk_left_ -= take;
    if (chunk_left_ == 0) {
      chunk_ = Chunk::kDataEnd;
    }
    return take;
  }
  bool has_lf = false;
  std::size_t take = line_extent(data, has_lf);
  // A size line (with extensions) is bounded alone; trailers share the head's limit.
  framing_bytes_ = chunk_ == Chunk::kTrailer ? framing_bytes_ + take : line_.size() + take;
  if (framing_bytes_ > (chunk_ == Chunk::kTrailer ? limits_.max_head_bytes : kMaxChunkLine)) {
    fail(400, chunk_ == Chunk::kTrailer
                  ? "malformed chunked body: trailers longer than --max-header-bytes"
                  : "malformed chunked body: a chunk-size line longer than 1024 bytes");
    return take;
  }
  line_.append(data.data(), has_lf ? take - 1 : take);
  if (!has_lf || !end_line("malformed chunked body: a line ends in a bare LF")) {
    return take;
  }
  std::string_view line = line_;
  if (chunk_ == Chunk::kSize) {
    chunk_size_line(line);
  } else if (chunk_ == Chunk::kDataEnd) {
    if (!line.empty()) {
      fail(400, "malformed chunked body: chunk data longer than its size");
    }
    chunk_ = Chunk::kSize;
  } else {
    trailer_line(line);
  }
  line_.clear();
  return take;
}

void RequestParser::chunk_size_line(std::string_view line) {
  std::size_t digits = 0;
  std::uint64_t size = 0;
  while (digits < line.size() && std::isxdigit(static_cast<unsigned char>(line[digits])) != 0) {
    char c = lower(line[digits]);
    size = std::min<std::uint64_t>(
        size * 16 + static_cast<std::uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10), kHuge >> 8);
    ++digits;
  }
  std::string_view ext = trim(line.substr(digits));
  if (digits == 0 || (!ext.empty() && ext.front() != ';')) {
    fail(400, "malformed chunked body: a chunk size is not hexadecimal");
    return;
  }
  if (size > limits_.max_body_bytes - body_.size()) {
    head_.body_too_large = true;
    fail(413, "request body is larger than " + std::to_string(limits_.max_body_bytes) +
                  " bytes (--max-body-bytes)");
    return;
  }
  chunk_left_ = size;
  chunk_ = size == 0 ? Chunk::kTrailer : Chunk::kData;
}

void RequestParser::trailer_line(std::string_view line) {
  if (line.empty()) {
    state_ = State::kDone;
    return;
  }
  std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
    fail(400, "malformed chunked body: a malformed trailer line");
  }
}

}  // namespace server::http1
