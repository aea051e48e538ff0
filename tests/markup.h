// A minimal XML / HTML reader for tests of generated documents (SVG charts, attention maps,
// report.html): parse_markup checks that every element closes in order, attribute values are
// quoted and given once per element, and no text holds a bare '<', and returns the start tags
// with their attributes.
#pragma once

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace lsf::testing {

struct Element {
  std::string tag;
  std::map<std::string, std::string> attributes;
};

// The start tags of a document, after checking that every element closes in order (HTML's void
// elements `void_tags` need no end tag), attribute values are quoted and given once, and no text holds a bare '<'.
inline std::vector<Element> parse_markup(const std::string& doc, const std::set<std::string>& void_tags = {}) {
  std::vector<Element> elements;
  std::vector<std::string> open;
  size_t at = 0;
  while ((at = doc.find('<', at)) != std::string::npos) {
    const size_t end = doc.find('>', at);
    REQUIRE(end != std::string::npos);
    std::string inside = doc.substr(at + 1, end - at - 1);
    at = end + 1;
    if (inside.rfind("?xml", 0) == 0 || inside.rfind("!DOCTYPE", 0) == 0) continue;
    if (inside[0] == '/') {
      INFO("closing </" << inside.substr(1) << ">");
      REQUIRE(!open.empty());
      REQUIRE(open.back() == inside.substr(1));
      open.pop_back();
      continue;
    }
    const bool self_closing = inside.back() == '/';
    if (self_closing) inside.pop_back();
    Element e;
    size_t p = inside.find_first_of(" \n");
    e.tag = inside.substr(0, p);
    REQUIRE(std::regex_match(e.tag, std::regex("[a-z][a-z0-9]*")));
    static const std::regex attribute(R"(\s+([a-zA-Z_:][-a-zA-Z0-9_:.]*)="([^"<]*)\")");
    std::string rest = p == std::string::npos ? "" : inside.substr(p);
    std::smatch m;
    while (std::regex_search(rest, m, attribute) && m.position(0) == 0) {
      INFO("<" << inside << ">");
      REQUIRE(e.attributes.count(m[1]) == 0);  // an attribute given twice is not XML
      e.attributes[m[1]] = m[2];
      rest = m.suffix();
    }
    INFO("<" << inside << ">");
    REQUIRE(rest.find_first_not_of(" \n") == std::string::npos);  // nothing unquoted left
    if (!self_closing && !void_tags.count(e.tag)) open.push_back(e.tag);
    elements.push_back(e);
  }
  CHECK(open.empty());
  return elements;
}

}  // namespace lsf::testing
