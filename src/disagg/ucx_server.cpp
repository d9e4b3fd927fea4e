// The producer's side of the pull protocol (wire.h) over UCX stream
// endpoints: one thread owns the worker and the listener, accepts
// connections, reads fixed-size requests and answers them from the
// LeaseTable, sending KV bytes straight from the lease's memory.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "disagg/transport.h"
#include "disagg/ucx_util.h"
#include "disagg/wire.h"
#include "model/fingerprint.h"

namespace llm::disagg {

namespace {

inline constexpr uint64_t kMaxRun = uint64_t{1} << 30;  // one PULL's bytes, at most

struct Send {
  void* req = nullptr;
  LeaseBytes keep;                 // the lease's bytes being sent
  std::unique_ptr<uint8_t[]> hdr;  // a reply header being sent
};

// A run's second half held back by the stall switch.
struct Held {
  const uint8_t* data = nullptr;
  size_t n = 0;
  LeaseBytes keep;
  std::chrono::steady_clock::time_point due;
};

struct Conn {
  ucp_ep_h ep = nullptr;
  uint8_t in[kRequestBytes] = {};
  void* recv = nullptr;
  std::atomic<bool> failed{false};
  std::vector<Send> sends;
  std::vector<Held> held;
  uint64_t lease = 0;
  LeaseBytes bytes;      // after a successful HELLO
  uint64_t pulled = 0;   // bytes sent
};

void OnEpError(void* arg, ucp_ep_h, ucs_status_t) { static_cast<Conn*>(arg)->failed = true; }

class UcxKvServer final : public KvServer {
 public:
  ~UcxKvServer() override {
    stop_ = true;
    if (worker_ != nullptr) ucp_worker_signal(worker_);
    if (thread_.joinable()) thread_.join();
    for (auto& c : conns_) c->failed = true;
    CloseFailed();
    if (listener_ != nullptr) ucp_listener_destroy(listener_);
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    if (ctx_ != nullptr) ucp_cleanup(ctx_);
  }

  static StatusOr<std::unique_ptr<KvServer>> Start(const ServerOptions& opt) {
    if (opt.leases == nullptr) return InvalidArgument("KV server without a lease table");
    LLM_ASSIGN_OR_RETURN(sockaddr_in sa, ParseListenAddress(opt.listen, true));
    auto s = std::unique_ptr<UcxKvServer>(new UcxKvServer(opt));
    LLM_ASSIGN_OR_RETURN(s->ctx_, CreateUcxContext());
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    ucs_status_t st = ucp_worker_create(s->ctx_, &wp, &s->worker_);
    if (st != UCS_OK) return UcxFail("UCX worker", st);
    ucp_listener_params_t lp{};
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
    lp.sockaddr.addrlen = sizeof sa;
    lp.conn_handler.cb = &UcxKvServer::OnConnect;
    lp.conn_handler.arg = s.get();
    st = ucp_listener_create(s->worker_, &lp, &s->listener_);
    if (st != UCS_OK) return UcxFail("KV transfer listener on " + opt.listen, st);
    ucp_listener_attr_t la{};
    la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    st = ucp_listener_query(s->listener_, &la);
    if (st != UCS_OK) return UcxFail("KV transfer listener address", st);
    s->port_ = ntohs(reinterpret_cast<const sockaddr_in*>(&la.sockaddr)->sin_port);
    s->host_ = opt.listen.substr(0, opt.listen.rfind(':'));
    if (s->host_ == "0.0.0.0") s->host_ = "127.0.0.1";
    s->thread_ = std::thread([p = s.get()] { p->Loop(); });
    return std::unique_ptr<KvServer>(std::move(s));
  }

  std::string host() const override { return host_; }
  uint16_t port() const override { return port_; }

 private:
  explicit UcxKvServer(const ServerOptions& opt) : opt_(opt) {}

  static void OnConnect(ucp_conn_request_h req, void* arg) {
    static_cast<UcxKvServer*>(arg)->incoming_.push_back(req);  // on the loop thread, inside progress
  }

  void Loop() {
    while (!stop_) {
      const unsigned events = ucp_worker_progress(worker_);
      bool busy = events != 0 || !incoming_.empty();
      Accept();
      for (auto& c : conns_) busy |= Drive(c.get()) || !c->sends.empty();
      CloseFailed();
      // Sends in flight need progress calls to go on (a socket's buffer
      // fills long before a run is out, and UCX's event fd does not say
      // when it drains): only an idle server sleeps on the event fd.
      if (!busy) WaitForEvents(worker_, 50);
    }
  }

  void Accept() {
    std::vector<ucp_conn_request_h> reqs;
    reqs.swap(incoming_);
    for (ucp_conn_request_h r : reqs) {
      auto c = std::make_unique<Conn>();
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.conn_request = r;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = OnEpError;
      ep.err_handler.arg = c.get();
      if (ucp_ep_create(worker_, &ep, &c->ep) != UCS_OK) {
        ucp_listener_reject(listener_, r);
        continue;
      }
      PostRecv(c.get());
      conns_.push_back(std::move(c));
    }
  }

  // Posts the next request's receive; handles requests that are already there.
  void PostRecv(Conn* c) {
    while (!c->failed) {
      ucp_request_param_t prm{};
      prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK;
      prm.flags = UCP_STREAM_RECV_FLAG_WAITALL;
      prm.cb.recv_stream = RecvDone;
      size_t len = 0;
      ucs_status_ptr_t r = ucp_stream_recv_nbx(c->ep, c->in, kRequestBytes, &len, &prm);
      if (UCS_PTR_IS_ERR(r)) {
        c->failed = true;
      } else if (r == nullptr) {
        Handle(c);
        continue;
      } else {
        c->recv = r;
      }
      return;
    }
  }

  bool Drive(Conn* c) {
    bool progressed = false;
    while (!c->held.empty() && std::chrono::steady_clock::now() >= c->held.front().due) {
      Held h = std::move(c->held.front());
      c->held.erase(c->held.begin());
      SendBytes(c, h.data, h.n, std::move(h.keep), nullptr);
      progressed = true;
    }
    for (size_t i = 0; i < c->sends.size();) {
      const ucs_status_t st = ucp_request_check_status(c->sends[i].req);
      if (st == UCS_INPROGRESS) {
        ++i;
        continue;
      }
      if (st != UCS_OK) c->failed = true;
      ucp_request_free(c->sends[i].req);
      c->sends.erase(c->sends.begin() + i);
      progressed = true;
    }
    // A request that arrived is handled even when the peer has closed
    // since (a DONE followed by the disconnect).
    if (c->recv != nullptr) {
      const ucs_status_t st = ucp_request_check_status(c->recv);
      if (st != UCS_INPROGRESS) {
        ucp_request_free(c->recv);
        c->recv = nullptr;
        progressed = true;
        if (st != UCS_OK) {
          c->failed = true;
        } else {
          Handle(c);
          PostRecv(c);
        }
      }
    }
    return progressed;
  }

  void SendBytes(Conn* c, const void* data, size_t n, LeaseBytes keep, std::unique_ptr<uint8_t[]> hdr) {
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    prm.cb.send = SendDone;
    ucs_status_ptr_t r = ucp_stream_send_nbx(c->ep, data, n, &prm);
    if (UCS_PTR_IS_ERR(r)) {
      c->failed = true;
    } else if (r != nullptr) {
      c->sends.push_back({r, std::move(keep), std::move(hdr)});
    }
  }

  void SendReply(Conn* c, const Reply& reply) {
    auto hdr = std::make_unique<uint8_t[]>(kReplyBytes);
    EncodeReply(reply, hdr.get());
    uint8_t* p = hdr.get();
    SendBytes(c, p, kReplyBytes, nullptr, std::move(hdr));
  }

  void Handle(Conn* c) {
    StatusOr<Request> req = DecodeRequest({c->in, kRequestBytes});
    if (!req.ok()) {
      c->failed = true;  // not our protocol: drop the connection
      return;
    }
    const Identity& me = opt_.identity;
    Reply reply;
    reply.type = req->type;
    switch (req->type) {
      case MsgType::kHello: {
        const LeaseTable::Found f = opt_.leases->FindAndExtend(req->lease);
        if (req->format_version != me.format_version || req->protocol_version != me.protocol_version)
          reply.code = ReplyCode::kVersionMismatch;
        else if (req->model_digest != me.model_digest) reply.code = ReplyCode::kModelMismatch;
        else if (req->geometry_digest != me.geometry_digest) reply.code = ReplyCode::kGeometryMismatch;
        else if (f.bytes == nullptr) reply.code = ReplyCode::kNoLease;
        if (reply.code == ReplyCode::kOk) {
          c->lease = req->lease;
          c->bytes = f.bytes;
          reply.total = f.bytes->size();
          reply.n_tokens = f.n_tokens;
        }
        SendReply(c, reply);
        return;
      }
      case MsgType::kPull: {
        const bool live = c->bytes != nullptr && req->lease == c->lease &&
                          opt_.leases->FindAndExtend(c->lease).bytes != nullptr;
        if (!live) reply.code = ReplyCode::kNoLease;
        else if (req->length == 0 || req->length > kMaxRun || req->offset > c->bytes->size() ||
                 req->length > c->bytes->size() - req->offset)
          reply.code = ReplyCode::kBadRange;
        if (reply.code != ReplyCode::kOk) {
          SendReply(c, reply);
          return;
        }
        const uint8_t* data = c->bytes->data() + req->offset;
        reply.offset = req->offset;
        reply.length = req->length;
        reply.checksum = Hash64(data, req->length);
        SendReply(c, reply);
        if (opt_.stall_ms > 0 && req->length >= 2) {
          const size_t half = req->length / 2;
          SendBytes(c, data, half, c->bytes, nullptr);
          c->held.push_back({data + half, req->length - half, c->bytes,
                             std::chrono::steady_clock::now() + std::chrono::milliseconds(opt_.stall_ms)});
          std::fprintf(stderr, "llmrt: KV server: LLM_KV_SERVE_STALL_MS: sent %zu of a run's %llu bytes, the rest in %lld ms\n",
                       half, static_cast<unsigned long long>(req->length), static_cast<long long>(opt_.stall_ms));
        } else {
          SendBytes(c, data, req->length, c->bytes, nullptr);
        }
        c->pulled += req->length;
        opt_.leases->CountServed(req->length);
        // The last byte handed over ends the lease (the sends keep the
        // bytes alive until they complete); a DONE after it is a no-op.
        if (req->offset + req->length == c->bytes->size()) Release(c);
        return;
      }
      case MsgType::kDone:
        if (c->bytes != nullptr && req->lease == c->lease) Release(c);
        return;
    }
  }

  // Ends the connection's lease: served when every byte went out.
  void Release(Conn* c) {
    opt_.leases->Release(c->lease, c->pulled >= c->bytes->size());
    c->bytes = nullptr;
  }

  // Closes the failed connections' endpoints (forcibly: their peer is gone
  // or misbehaved), then lets go of what their sends held.
  void CloseFailed() {
    for (size_t i = 0; i < conns_.size();) {
      Conn* c = conns_[i].get();
      if (!c->failed) {
        ++i;
        continue;
      }
      ucp_request_param_t prm{};
      prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t r = ucp_ep_close_nbx(c->ep, &prm);
      (void)WaitRequest(worker_, r, std::chrono::steady_clock::now() + std::chrono::seconds(2), "closing a KV endpoint");
      if (c->recv != nullptr) ucp_request_free(c->recv);
      for (Send& s : c->sends) ucp_request_free(s.req);
      conns_.erase(conns_.begin() + i);
    }
  }

  ServerOptions opt_;
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  std::string host_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::vector<ucp_conn_request_h> incoming_;  // loop thread only
  std::vector<std::unique_ptr<Conn>> conns_;  // loop thread only (and the destructor after the join)
};

}  // namespace

bool TransportAvailable() { return true; }

StatusOr<std::unique_ptr<KvServer>> StartKvServer(const ServerOptions& opt) { return UcxKvServer::Start(opt); }

}  // namespace llm::disagg
