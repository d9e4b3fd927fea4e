// The consumer's side of the pull protocol (wire.h) over a UCX stream
// endpoint: HELLO, then PULLs of contiguous runs of the producer's KV
// stream (each checksummed, each extending the lease), then DONE. Every
// step waits at most the step timeout, so a producer that dies or stalls
// ends the pull with an error instead of a hang.
#include <atomic>
#include <mutex>

#include "disagg/transport.h"
#include "disagg/ucx_util.h"
#include "disagg/wire.h"
#include "model/fingerprint.h"

namespace llm::disagg {

namespace {

using SteadyClock = std::chrono::steady_clock;

// One UCX context per process for pulls (workers are per pull).
StatusOr<ucp_context_h> PullContext() {
  static std::mutex mu;
  static ucp_context_h ctx = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (ctx == nullptr) {
    LLM_ASSIGN_OR_RETURN(ctx, CreateUcxContext());
  }
  return ctx;
}

void OnEpError(void* arg, ucp_ep_h, ucs_status_t) { static_cast<std::atomic<bool>*>(arg)->store(true); }

// A worker and an endpoint, closed (forcibly on error) and destroyed in
// that order before any buffer a request may still write to goes.
class Connection {
 public:
  ~Connection() {
    if (ep_ != nullptr) {
      ucp_request_param_t prm{};
      prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      prm.flags = ok_ ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t r = ucp_ep_close_nbx(ep_, &prm);
      (void)WaitRequest(worker_, r, SteadyClock::now() + std::chrono::seconds(2), "closing the KV endpoint");
    }
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
  }

  Status Open(const TransferDescriptor& d) {
    LLM_ASSIGN_OR_RETURN(ucp_context_h ctx, PullContext());
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    ucs_status_t st = ucp_worker_create(ctx, &wp, &worker_);
    if (st != UCS_OK) return UcxFail("UCX worker", st);
    LLM_ASSIGN_OR_RETURN(sockaddr_in sa, ResolveAddress(d.host, d.port));
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
    ep.sockaddr.addrlen = sizeof sa;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = OnEpError;
    ep.err_handler.arg = &failed_;
    st = ucp_ep_create(worker_, &ep, &ep_);
    if (st != UCS_OK) {
      ep_ = nullptr;
      return UcxFail("connecting to the KV producer at " + d.host + ":" + std::to_string(d.port), st);
    }
    return Status::Ok();
  }

  Status Send(const void* data, size_t n, SteadyClock::time_point deadline, const char* what) {
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    prm.cb.send = SendDone;
    return Checked(WaitRequest(worker_, ucp_stream_send_nbx(ep_, data, n, &prm), deadline, what));
  }

  Status Recv(void* data, size_t n, SteadyClock::time_point deadline, const char* what) {
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK;
    prm.flags = UCP_STREAM_RECV_FLAG_WAITALL;
    prm.cb.recv_stream = RecvDone;
    size_t len = 0;
    return Checked(WaitRequest(worker_, ucp_stream_recv_nbx(ep_, data, n, &len, &prm), deadline, what));
  }

  void MarkOk() { ok_ = true; }

 private:
  Status Checked(Status s) {
    if (s.ok() && failed_) return IoError("the KV producer's connection failed");
    return s;
  }
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  std::atomic<bool> failed_{false};
  bool ok_ = false;
};

Status ReplyStatus(const Reply& r, MsgType want) {
  if (r.type != want) return KvCorrupt("the KV producer answered out of turn");
  if (r.code == ReplyCode::kOk) return Status::Ok();
  const std::string text = std::string("KV producer: ") + ReplyCodeText(r.code);
  switch (r.code) {
    case ReplyCode::kModelMismatch:
    case ReplyCode::kGeometryMismatch:
    case ReplyCode::kVersionMismatch: return KvMismatch(text);
    default: return IoError(text);
  }
}

}  // namespace

StatusOr<PullResult> PullKv(const TransferDescriptor& d, const PullOptions& opt) {
  const Identity& me = opt.identity;
  if (d.model_digest != me.model_digest)
    return KvMismatch("the KV transfer descriptor names another model (digest " + std::to_string(d.model_digest) + ")");
  if (d.geometry_digest != me.geometry_digest) return KvMismatch("the KV transfer descriptor names another KV geometry");
  if (opt.chunk_bytes == 0) return InvalidArgument("KV pull with a zero chunk size");
  const auto step = std::chrono::milliseconds(opt.step_timeout_ms);
  PullResult out;
  // The buffer outlives the connection (declared first, destroyed last).
  Connection conn;
  LLM_RETURN_IF_ERROR(conn.Open(d));

  uint8_t msg[kRequestBytes];
  uint8_t rep[kReplyBytes];
  Request hello;
  hello.type = MsgType::kHello;
  hello.lease = d.lease;
  hello.model_digest = me.model_digest;
  hello.geometry_digest = me.geometry_digest;
  hello.format_version = me.format_version;
  hello.protocol_version = me.protocol_version;
  EncodeRequest(hello, msg);
  LLM_RETURN_IF_ERROR(conn.Send(msg, kRequestBytes, SteadyClock::now() + step, "KV pull: HELLO"));
  LLM_RETURN_IF_ERROR(conn.Recv(rep, kReplyBytes, SteadyClock::now() + step, "KV pull: HELLO reply"));
  LLM_ASSIGN_OR_RETURN(Reply hr, DecodeReply({rep, kReplyBytes}));
  LLM_RETURN_IF_ERROR(ReplyStatus(hr, MsgType::kHello));
  if (hr.total != d.bytes || hr.n_tokens != d.n_tokens)
    return KvCorrupt("the KV producer's lease holds " + std::to_string(hr.total) + " bytes / " +
                     std::to_string(hr.n_tokens) + " tokens, the descriptor says " + std::to_string(d.bytes) + " / " +
                     std::to_string(d.n_tokens));
  out.n_tokens = hr.n_tokens;
  out.stream.resize(hr.total);

  for (uint64_t off = 0; off < hr.total;) {
    const uint64_t len = std::min<uint64_t>(opt.chunk_bytes, hr.total - off);
    Request pull;
    pull.type = MsgType::kPull;
    pull.lease = d.lease;
    pull.offset = off;
    pull.length = len;
    EncodeRequest(pull, msg);
    LLM_RETURN_IF_ERROR(conn.Send(msg, kRequestBytes, SteadyClock::now() + step, "KV pull: PULL"));
    LLM_RETURN_IF_ERROR(conn.Recv(rep, kReplyBytes, SteadyClock::now() + step, "KV pull: PULL reply"));
    LLM_ASSIGN_OR_RETURN(Reply pr, DecodeReply({rep, kReplyBytes}));
    LLM_RETURN_IF_ERROR(ReplyStatus(pr, MsgType::kPull));
    if (pr.offset != off || pr.length != len) return KvCorrupt("the KV producer sent another range than asked for");
    LLM_RETURN_IF_ERROR(conn.Recv(out.stream.data() + off, len, SteadyClock::now() + step, "KV pull: data"));
    if (Hash64(out.stream.data() + off, len) != pr.checksum)
      return KvCorrupt("KV transfer checksum mismatch in bytes " + std::to_string(off) + ".." +
                       std::to_string(off + len));
    ++out.n_pulls;
    off += len;
  }
  Request done;
  done.type = MsgType::kDone;
  done.lease = d.lease;
  EncodeRequest(done, msg);
  LLM_RETURN_IF_ERROR(conn.Send(msg, kRequestBytes, SteadyClock::now() + step, "KV pull: DONE"));
  conn.MarkOk();
  return out;
}

}  // namespace llm::disagg
