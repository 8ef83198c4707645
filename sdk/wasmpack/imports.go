package wasmpack

import "github.com/wophost/wophost/sdk/wop"

// imports is the host as a node sees it: the ABI's imports with Go types.
// The wasip1 build implements it over the module's imports; the tests
// implement it in memory.
type imports interface {
	// channelRead and variableGet report a miss, the ABI's (0, 0), as
	// false.
	channelRead(name string) ([]byte, bool)
	channelWrite(name string, value []byte) int32
	variableGet(key string) ([]byte, bool)
	variableSet(key string, value []byte) int32
	// interrupt returns the resume value, or false when the host
	// returned none.
	interrupt(payload []byte) ([]byte, bool)
	log(level int32, msg string)
	nowMs() int64
	random(p []byte)
	// call is wophost_call: the answer is {"result": ...} or
	// {"error": ...}.
	call(family, method string, payload []byte) []byte
	// advertised is wophost_advertised.
	advertised() []byte
}

// Status codes the ABI's write imports return.
const (
	statusOK                               = 0
	statusChannelAccessDenied              = 1
	statusChannelSchemaBreakingChange      = 2
	statusChannelCrossEngineWriteForbidden = 3
	statusValidationError                  = 10
	statusNotFound                         = 11
	statusCapabilityBreach                 = 20
	statusHostError                        = 99
)

// statusCode names status by the error code it stands for; an unknown
// one is a host_error, as the ABI has modules treat it.
func statusCode(status int32) string {
	switch status {
	case statusChannelAccessDenied:
		return "channel_access_denied"
	case statusChannelSchemaBreakingChange:
		return "channel_schema_breaking_change"
	case statusChannelCrossEngineWriteForbidden:
		return "channel_cross_engine_write_forbidden"
	case statusValidationError:
		return wop.CodeValidation
	case statusNotFound:
		return wop.CodeNotFound
	case statusCapabilityBreach:
		return "capability_breach"
	}
	return "host_error"
}

// Levels of openwop_log.
const (
	levelTrace int32 = iota
	levelDebug
	levelInfo
	levelWarn
	levelError
)
