#ifndef MG_LIBXML2_SHIM_H
#define MG_LIBXML2_SHIM_H
/* libxml2's streaming reader, the one XML parser of input (Sources/ODataCore/SafeXML.swift). */
#include <libxml/xmlversion.h>
/* Debian's libxml2 is built with ICU, whose headers clash with Foundation's own copy of ICU in one Swift
 * module: they are left out (only the layout of xmlCharEncodingHandler, never used here, depends on it). */
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/xmlreader.h>
#include <libxml/xmlerror.h>

/* The parser options every parse uses: no network, no DTD loading or validation, no entity substitution
 * (XML_PARSE_NOENT and XML_PARSE_DTDLOAD are never set), no error or warning printed, and without
 * XML_PARSE_HUGE, so libxml2's own limits (depth 256, text nodes 10 MB, names 50 000 bytes) hold. */
static inline int mg_xml_safe_options(void) {
    return XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOXINCNODE;
}

/* libxml2 reports some errors (an input encoding conversion that fails: "I/O error : encoder error") through
 * its generic error channel, which prints to stderr whatever the parser options say; hostile input must not
 * write to the gateway's log. The channel is per thread, so every parse silences it on its own thread. */
static inline void mg_xml_ignore_message(void *ctx, const char *msg, ...) {
    (void)ctx;
    (void)msg;
}
static inline void mg_xml_quiet(void) { xmlSetGenericErrorFunc(NULL, mg_xml_ignore_message); }
#endif
