import HTTPCore
import JSONCore

/// An error in Algolia's format: the body `{"message": …, "status": N}` with that status.
public struct AlgoliaError: GatewayError, Sendable {
    /// The HTTP status.
    public var status: Int
    /// The message for the client.
    public var message: String

    /// An error with `status` and `message`.
    public init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }

    /// The error as a response.
    public func response() -> HTTPResponse { Self.response(status, message) }

    /// An error response in Algolia's format.
    public static func response(_ status: Int, _ message: String) -> HTTPResponse {
        .json(status, #"{"message":\#(JSON.string(message).serialized()),"status":\#(status)}"#)
    }
}
