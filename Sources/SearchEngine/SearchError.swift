/// An error answered to the client the way Algolia does: an HTTP status (400 for bad parameters or
/// filters, 404 for missing objects or indices) and a message that says what and where.
public struct SearchError: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: Int
    public var message: String

    public init(status: Int, message: String) {
        self.status = status
        self.message = message
    }

    public var description: String { "\(status): \(message)" }
}
