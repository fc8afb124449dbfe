import Foundation
import JSONCore

/// The restrictions carried by a secured API key: `base64(hex HMAC-SHA256 + "params")`. The HMAC cannot
/// be checked locally (the parent key is unknown), but a key is only used locally once the upstream has
/// accepted it, so its parameters are authentic.
public enum SecuredKey {
    /// The key's embedded parameters, or nil when `key` is not a secured key.
    public static func restrictions(_ key: String) -> JSONObject? {
        guard key.count > 64, let data = Data(base64Encoded: key) ?? Data(base64Encoded: padded(key)) else {
            return nil
        }
        let text = String(decoding: data, as: UTF8.self)
        let hex = text.prefix(64)
        guard hex.count == 64, hex.allSatisfy(\.isHexDigit) else { return nil }
        return JSON.parseAlgoliaParams(String(text.dropFirst(64)))
    }

    private static func padded(_ s: String) -> String {
        s + String(repeating: "=", count: (4 - s.count % 4) % 4)
    }

    /// Whether `index` matches a `restrictIndices` entry (`*` wildcards at either end).
    static func matches(_ pattern: String, _ index: String) -> Bool {
        if pattern == "*" { return true }
        if pattern.hasPrefix("*") && pattern.hasSuffix("*") && pattern.count > 1 {
            return index.contains(pattern.dropFirst().dropLast())
        }
        if pattern.hasPrefix("*") { return index.hasSuffix(pattern.dropFirst()) }
        if pattern.hasSuffix("*") { return index.hasPrefix(pattern.dropLast()) }
        return pattern == index
    }
}
