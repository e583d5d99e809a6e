#include "shared/base/cli_help.h"

#include <memory>
#include <sstream>
#include <string>

namespace k3::base {
namespace {

// CLI11's formatter with the default moved from the name column ("INT=4") to
// the end of the description as "(default: 4)", and a marker on every option.
class K3HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::stringstream out;
    if (!opt->get_option_text().empty()) {
      out << " " << opt->get_option_text();
    } else if (opt->get_type_size() != 0) {
      if (!opt->get_type_name().empty()) out << " " << get_label(opt->get_type_name());
      if (opt->get_expected_max() == CLI::detail::expected_max_vector_size)
        out << " ...";
      else if (opt->get_expected_min() > 1)
        out << " x " << opt->get_expected();
    }
    if (!opt->get_envname().empty())
      out << " (" << get_label("Env") << ":" << opt->get_envname() << ")";
    if (!opt->get_needs().empty()) {
      out << " " << get_label("Needs") << ":";
      for (const CLI::Option* o : opt->get_needs()) out << " " << o->get_name();
    }
    if (!opt->get_excludes().empty()) {
      out << " " << get_label("Excludes") << ":";
      for (const CLI::Option* o : opt->get_excludes()) out << " " << o->get_name();
    }
    return out.str();
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string desc = opt->get_description();
    const std::string sep = desc.empty() ? "" : " ";
    if (opt->get_required()) return desc + sep + "(required)";
    if (opt->get_expected_max() == 0) return desc + sep + "(flag)";
    if (desc.find("(default") != std::string::npos || desc.find("default:") != std::string::npos)
      return desc;
    const std::string def = opt->get_default_str();
    // An empty vector captures as "[]"; an unset string as "".
    if (def.empty() || def == "[]") return desc + sep + "(default: unset)";
    return desc + sep + "(default: " + def + ")";
  }
};

}  // namespace

void use_k3_help_format(CLI::App& app) {
  app.formatter(std::make_shared<K3HelpFormatter>());
  app.option_defaults()->always_capture_default();
}

}  // namespace k3::base
