// LogCapture: the lines logged through spdlog's default logger while it exists, in memory, for
// tests of in-process loops that count what they logged. Create it before the threads that log
// start (spdlog's list of sinks is not guarded); when it goes, its sink stays in the list and
// drops what comes later, so a thread still logging never races with its removal.
#pragma once

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <string>

namespace gpushare::testing {

class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<Sink>()) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogCapture() { sink_->Close(); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  size_t Count(const std::string& what) const {
    const std::string text = Text();
    size_t n = 0;
    for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
  }
  std::string Text() const { return sink_->Text(); }

 private:
  class Sink final : public spdlog::sinks::base_sink<std::mutex> {
   public:
    std::string Text() {
      std::lock_guard<std::mutex> lock(mutex_);
      return text_;
    }
    void Close() {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
      text_.clear();
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      if (closed_) return;
      text_.append(msg.payload.data(), msg.payload.size());
      text_ += "\n";
    }
    void flush_() override {}

   private:
    std::string text_;
    bool closed_ = false;
  };
  std::shared_ptr<Sink> sink_;
};

}  // namespace gpushare::testing
