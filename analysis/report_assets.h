// Files of analysis/report_assets/ and the pinned charting library, embedded into the binary at
// build time (analysis/CMakeLists.txt), so the report needs nothing at run time.
#pragma once

#include <string_view>

namespace collscope {

std::string_view ReportTemplateHtml();  // report_assets/report.html
std::string_view ReportCss();           // report_assets/report.css
std::string_view ReportJs();            // report_assets/report.js
std::string_view ReportEchartsJs();     // echarts.min.js (pinned); empty when not fetched

}  // namespace collscope
