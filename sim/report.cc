#include "sim/report.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

namespace gpushare::sim {
namespace {

std::string Fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::vector<std::string> PolicyOrder(const std::vector<SummaryPoint>& summary) {
  std::vector<std::string> out;
  for (const auto& s : summary)
    if (std::find(out.begin(), out.end(), s.policy) == out.end()) out.push_back(s.policy);
  return out;
}

std::string XmlEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

}  // namespace

std::string CurvesCsv(const std::vector<RunResult>& runs) {
  std::string out = "policy,seed,arrived_pct,unallocated_pct,frag_pct\n";
  for (const auto& r : runs)
    for (const auto& p : r.curve) {
      if (!p.present) continue;
      out += r.policy + "," + std::to_string(r.seed) + "," + std::to_string(p.arrived_pct) + "," +
             Fixed(p.unallocated_pct) + "," + Fixed(p.frag_pct) + "\n";
    }
  return out;
}

std::string SummaryCsv(const std::vector<SummaryPoint>& summary) {
  std::string out = "policy,arrived_pct,unallocated_pct_median\n";
  for (const auto& s : summary)
    out += s.policy + "," + std::to_string(s.arrived_pct) + "," + Fixed(s.unallocated_median, 3) +
           "\n";
  return out;
}

std::string SummaryTable(const std::vector<SummaryPoint>& summary, const std::vector<int>& pcts) {
  std::map<std::pair<std::string, int>, double> at;
  for (const auto& s : summary) at[{s.policy, s.arrived_pct}] = s.unallocated_median;
  std::string out = "unallocated GPU % (median over seeds) at arrived workload %\n";
  Appendf(&out, "%-12s", "policy");
  for (int p : pcts) Appendf(&out, "%8d%%", p);
  out += "\n";
  Appendf(&out, "%-12s", "ideal");
  for (int p : pcts) Appendf(&out, "%9.2f", std::max(0, 100 - p) * 1.0);
  out += "\n";
  for (const auto& policy : PolicyOrder(summary)) {
    Appendf(&out, "%-12s", policy.c_str());
    for (int p : pcts) {
      auto it = at.find({policy, p});
      if (it == at.end()) {
        Appendf(&out, "%9s", "-");
      } else {
        Appendf(&out, "%9.2f", it->second);
      }
    }
    out += "\n";
  }
  return out;
}

void Appendf(std::string* out, const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const size_t at = out->size();
    out->resize(at + static_cast<size_t>(n) + 1);
    std::vsnprintf(out->data() + at, static_cast<size_t>(n) + 1, format, again);
    out->resize(at + static_cast<size_t>(n));
  }
  va_end(again);
}

std::string PlotSvg(const std::vector<SummaryPoint>& summary, const std::string& title) {
  const double W = 820, H = 520, left = 70, right = 170, top = 40, bottom = 60;
  const double pw = W - left - right, ph = H - top - bottom;
  int max_x = 100;
  double max_y = 0;
  for (const auto& s : summary) {
    max_x = std::max(max_x, s.arrived_pct);
    max_y = std::max(max_y, s.unallocated_median);
  }
  max_y = std::max(10.0, std::ceil(max_y / 10.0) * 10.0);
  auto X = [&](double v) { return left + pw * v / max_x; };
  auto Y = [&](double v) { return top + ph * (1.0 - v / max_y); };
  static const char* colors[] = {"#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
                                 "#d62728", "#000000", "#8c564b", "#e377c2", "#17becf"};
  std::string o;
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Fixed(W, 0) + "\" height=\"" +
       Fixed(H, 0) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += "<text x=\"" + Fixed(left, 0) + "\" y=\"24\" font-size=\"15\">" + XmlEscape(title) +
       "</text>\n";
  // Grid and axes.
  for (int x = 0; x <= max_x; x += 10) {
    o += "<line x1=\"" + Fixed(X(x), 1) + "\" y1=\"" + Fixed(top, 1) + "\" x2=\"" + Fixed(X(x), 1) +
         "\" y2=\"" + Fixed(top + ph, 1) + "\" stroke=\"#eee\"/>\n";
    o += "<text x=\"" + Fixed(X(x), 1) + "\" y=\"" + Fixed(top + ph + 18, 1) +
         "\" text-anchor=\"middle\">" + std::to_string(x) + "</text>\n";
  }
  for (double y = 0; y <= max_y + 1e-9; y += max_y / 10) {
    o += "<line x1=\"" + Fixed(left, 1) + "\" y1=\"" + Fixed(Y(y), 1) + "\" x2=\"" +
         Fixed(left + pw, 1) + "\" y2=\"" + Fixed(Y(y), 1) + "\" stroke=\"#eee\"/>\n";
    o += "<text x=\"" + Fixed(left - 8, 1) + "\" y=\"" + Fixed(Y(y) + 4, 1) +
         "\" text-anchor=\"end\">" + Fixed(y, 0) + "</text>\n";
  }
  o += "<rect x=\"" + Fixed(left, 1) + "\" y=\"" + Fixed(top, 1) + "\" width=\"" + Fixed(pw, 1) +
       "\" height=\"" + Fixed(ph, 1) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  o += "<text x=\"" + Fixed(left + pw / 2, 1) + "\" y=\"" + Fixed(H - 18, 1) +
       "\" text-anchor=\"middle\">arrived workload (% of GPU capacity)</text>\n";
  o += "<text transform=\"translate(18," + Fixed(top + ph / 2, 1) +
       ") rotate(-90)\" text-anchor=\"middle\">unallocated GPU (%)</text>\n";
  // Ideal line.
  std::string ideal;
  for (int x = 0; x <= max_x; ++x)
    ideal +=
        Fixed(X(x), 1) + "," + Fixed(Y(std::min<double>(max_y, std::max(0, 100 - x))), 1) + " ";
  o += "<polyline fill=\"none\" stroke=\"#bbb\" stroke-dasharray=\"5,4\" points=\"" + ideal +
       "\"/>\n";
  const auto policies = PolicyOrder(summary);
  for (size_t i = 0; i < policies.size(); ++i) {
    std::string pts;
    for (const auto& s : summary)
      if (s.policy == policies[i])
        pts += Fixed(X(s.arrived_pct), 1) + "," +
               Fixed(Y(std::min(max_y, s.unallocated_median)), 1) + " ";
    const char* c = colors[i % 10];
    o += "<polyline fill=\"none\" stroke=\"" + std::string(c) +
         "\" stroke-width=\"1.8\" points=\"" + pts + "\"/>\n";
    const double ly = top + 16 + 20.0 * static_cast<double>(i);
    o += "<line x1=\"" + Fixed(left + pw + 15, 1) + "\" y1=\"" + Fixed(ly, 1) + "\" x2=\"" +
         Fixed(left + pw + 40, 1) + "\" y2=\"" + Fixed(ly, 1) + "\" stroke=\"" + c +
         "\" stroke-width=\"2\"/>\n";
    o += "<text x=\"" + Fixed(left + pw + 46, 1) + "\" y=\"" + Fixed(ly + 4, 1) + "\">" +
         XmlEscape(policies[i]) + "</text>\n";
  }
  const double ly = top + 16 + 20.0 * static_cast<double>(policies.size());
  o += "<line x1=\"" + Fixed(left + pw + 15, 1) + "\" y1=\"" + Fixed(ly, 1) + "\" x2=\"" +
       Fixed(left + pw + 40, 1) + "\" y2=\"" + Fixed(ly, 1) +
       "\" stroke=\"#bbb\" stroke-dasharray=\"5,4\"/>\n";
  o += "<text x=\"" + Fixed(left + pw + 46, 1) + "\" y=\"" + Fixed(ly + 4, 1) + "\">ideal</text>\n";
  o += "</svg>\n";
  return o;
}

Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::Unavailable(path + ": cannot open for writing: " + std::strerror(errno));
  out << content;
  out.close();
  if (!out) return Status::Unavailable(path + ": write failed");
  return Status::Ok();
}

Status MakeDirs(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("empty output directory");
  std::string cur;
  size_t i = 0;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string::npos) slash = path.size();
    cur = path.substr(0, slash);
    if (!cur.empty()) {
      struct stat st;
      if (stat(cur.c_str(), &st) != 0) {
        if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
          return Status::Unavailable(cur + ": cannot create directory: " + std::strerror(errno));
      } else if (!S_ISDIR(st.st_mode)) {
        return Status::InvalidArgument(cur + ": exists and is not a directory");
      }
    }
    i = slash + 1;
  }
  return Status::Ok();
}

}  // namespace gpushare::sim
