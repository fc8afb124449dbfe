import Crypto
import Foundation
import Testing
import _CryptoExtras

@testable import Storage

/// The encrypting VFS's in-place page cipher (`PageCipher`, BoringSSL's AEAD through one context per file)
/// writes and reads exactly the format swift-crypto's `AES.GCM` does — stores written before it stay
/// readable — and refuses what does not verify.
@Suite struct PageCipherTests {
    let usable = StoreHeader.usable
    let pageSize = StoreHeader.pageSize
    let key = SymmetricKey(data: (0..<32).map { UInt8($0 &* 7 &+ 1) })
    let maskKey = SymmetricKey(data: (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) })
    let aad: [UInt8] = [0x44, 0, 0, 0, 9]

    func page(_ seed: UInt8) -> [UInt8] {
        (0..<StoreHeader.usable).map { UInt8(truncatingIfNeeded: $0) &+ seed }
    }

    @Test func sealsWhatAESGCMOpens() throws {
        let cipher = try #require(PageCipher(key: key, maskKey: maskKey))
        let plain = page(3)
        let nonce: [UInt8] = Array(1...12)
        var stored = [UInt8](repeating: 0, count: pageSize)
        stored.replaceSubrange(usable..<(usable + 12), with: nonce)
        let ok = stored.withUnsafeMutableBytes { out in
            plain.withUnsafeBytes {
                cipher.seal($0.baseAddress!, into: out.baseAddress!, aad: aad, aadCount: aad.count)
            }
        }
        #expect(ok)
        let box = try AES.GCM.SealedBox(
            nonce: AES.GCM.Nonce(data: nonce), ciphertext: stored[0..<usable],
            tag: stored[(usable + 12)..<pageSize])
        #expect(Array(try AES.GCM.open(box, using: key, authenticating: aad)) == plain)
    }

    @Test func opensWhatAESGCMSealsAndRefusesATamperedPage() throws {
        let cipher = try #require(PageCipher(key: key, maskKey: maskKey))
        let plain = page(11)
        let nonce = AES.GCM.Nonce()
        let box = try AES.GCM.seal(plain, using: key, nonce: nonce, authenticating: aad)
        let stored = Array(box.ciphertext) + Array(nonce) + Array(box.tag)
        #expect(stored.count == pageSize)
        func open(_ stored: [UInt8], aad: [UInt8]) -> [UInt8]? {
            var out = [UInt8](repeating: 0, count: usable)
            let ok = out.withUnsafeMutableBytes { o in
                stored.withUnsafeBytes {
                    cipher.open($0.baseAddress!, into: o.baseAddress!, aad: aad, aadCount: aad.count)
                }
            }
            return ok ? out : nil
        }
        #expect(open(stored, aad: aad) == plain)
        for offset in [0, usable - 1, usable + 3, pageSize - 1] {  // ciphertext, nonce, tag
            var tampered = stored
            tampered[offset] ^= 0x01
            #expect(open(tampered, aad: aad) == nil, "byte \(offset) flipped")
        }
        #expect(open(stored, aad: [0x44, 0, 0, 0, 10]) == nil, "another page number")
        #expect(PageCipher(key: SymmetricKey(size: .bits128), maskKey: maskKey) == nil)
        #expect(PageCipher(key: key, maskKey: SymmetricKey(size: .bits128)) == nil)
    }

    @Test func masksAsAESPermuteDoes() throws {
        let cipher = try #require(PageCipher(key: key, maskKey: maskKey))
        for seed in 0..<4 {
            var block: [UInt8] = (0..<16).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed) }
            var expected = block
            try AES.permute(&expected, key: maskKey)
            block.withUnsafeMutableBytes { cipher.mask($0.baseAddress!) }
            #expect(block == expected)
        }
    }
}
