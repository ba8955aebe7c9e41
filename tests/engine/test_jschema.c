/* test_jschema: the JSON Schema validator of structured outputs (engine/jschema.h): compile errors
 * naming the node; state sizes; hand-written documents accepted whole, byte by byte and in
 * random pieces, or rejected at the right byte; the whitespace and depth limits; no dead ends
 * at the depth limit; messages that stay valid UTF-8; long $def chains on a small stack. */
#include <pthread.h>

#include "tests/engine/jschema_ref.h"

/* ---- compile ------------------------------------------------------------------------------------ */

static void test_compile_errors(void)
{
    static const struct {
        const char *schema, *msg;
    } cases[] = {
        {"{'type':'object','properties':{'age':{'type':'string','minimum':0}}}",
         "schema/properties/age: 'minimum' needs \"type\" \"integer\" or \"number\""},
        {"{'type':'object','properties':{'a/b~':{'type':['string','null'],'maximum':0}}}",
         "schema/properties/a~1b~0: 'maximum' needs \"type\" \"integer\" or \"number\""},
        {"{'type':'integer','minimum':5,'exclusiveMaximum':5}", "schema: no number lies within the bounds"},
        {"{'type':'integer','minimum':2.5,'maximum':2.9}", "schema: no number lies within the bounds"},
        {"{'type':'number','exclusiveMinimum':1,'maximum':1}", "schema: no number lies within the bounds"},
        {"{'type':'integer','minimum':'0'}", "schema: 'minimum' must be a finite number"},
        {"{'type':'integer','enum':[1,2],'maximum':1}", "schema: bounds beside 'enum' are not supported"},
        {"{'type':'integer','multipleOf':2}", "schema: 'multipleOf' is not supported"},
        {"{'type':'string','pattern':'(?=a)'}",
         "schema: 'pattern': lookarounds and named groups are not supported"},
        {"{'type':'array','items':{'type':'string','format':'hostname'}}",
         "schema/items: 'format': 'hostname' is not supported"},
        {"{'allOf':[{'type':'null'}]}", "schema: 'allOf' is not supported"},
        {"{'type':'object','name':'x'}", "schema: 'name' is not supported"},
        {"{'type':", "schema: invalid JSON"},
        {"{'type':'null','type':'null'}", "schema: invalid JSON"},
        {"[]", "schema: a schema must be an object"},
        {"true", "true/false schemas are not supported"},
        {"{}", "schema: no 'type'"},
        {"{'type':'strin'}", "schema: 'type' must be one of"},
        {"{'type':[]}", "schema: 'type' must not be an empty array"},
        {"{'type':'object','properties':{'a':{'type':'null'}},'required':['b']}",
         "schema: required property 'b' is not in 'properties'"},
        {"{'type':'object','additionalProperties':{'type':'string'}}",
         "schema: 'additionalProperties' other than true/false is not supported"},
        {"{'type':'object','properties':{'a\\'b':{'type':'null'}}}", "needs escaping"},
        {"{'type':'array'}", "schema: 'items' is required"},
        {"{'type':'array','items':[{'type':'null'}]}", "schema: 'items' as an array"},
        {"{'type':'array','items':{'type':'null'},'maxItems':300}",
         "schema: 'maxItems' must be an integer from 0 to 255"},
        {"{'type':'array','items':{'type':'null'},'minItems':3,'maxItems':2}", "schema: 'minItems' is above"},
        {"{'type':'string','maxLength':-1}", "schema: 'maxLength' must be an integer"},
        {"{'enum':[{'a':1}]}", "schema: 'enum' values that are objects or arrays are not supported"},
        {"{'type':'integer','enum':['a',1.5]}", "schema: no value of 'enum' fits"},
        {"{'type':'string','enum':['abc'],'maxLength':2}", "schema: no value of 'enum' fits"},
        {"{'enum':[]}", "schema: 'enum' must be a non-empty array"},
        {"{'$ref':'#/$defs/X'}", "schema: '$ref' target #/$defs/X not found"},
        {"{'$ref':'http://example.com/s.json'}", "schema: '$ref' must be a local JSON pointer"},
        {"{'$ref':'#/$defs/A','$defs':{'A':{'$ref':'#/$defs/B'},'B':{'$ref':'#/$defs/A'}}}",
         "'$ref' loops without reaching a schema"},
        {"{'$ref':'#/$defs/A','type':'null','$defs':{'A':{'type':'null'}}}",
         "schema: 'type' beside '$ref' is not supported"},
        {"{'anyOf':[{'type':'integer'},{'type':'number'}]}", "schema: alternatives overlap"},
        {"{'anyOf':[{'type':'object'},{'type':['null','object']}]}", "schema: alternatives overlap"},
        {"{'anyOf':[{'type':'string'}],'oneOf':[{'type':'null'}]}", "beside 'anyOf' is not supported"},
        {"{'anyOf':[]}", "schema: 'anyOf' must be an array of 1 to"},
        {"{'type':'null','$defs':{'A':{'type':'object','properties':{'x':{'type':'strng'}}}}}",
         "schema/$defs/A/properties/x: 'type' must be one of"},
        {"{'type':'object','properties':{'a':{'$id':'x','type':'null'}}}",
         "schema/properties/a: '$id' below the root is not supported"},
        {"{'$ref':'#/$defs/A','$defs':{'A':{'anyOf':[{'$ref':'#/$defs/A'}]}}}",
         "schema/$defs/A: 'anyOf' contains itself"},
        /* no finite document: each needs one more container, past any limit */
        {"{'type':'object','properties':{'a':{'$ref':'#'}},'required':['a']}",
         "schema: no document nests fewer than 33 containers"},
        {"{'$ref':'#/$defs/L','$defs':{'L':{'type':'array','items':{'$ref':'#/$defs/L'},'minItems':1}}}",
         "schema/$defs/L: no document nests fewer than 33 containers"},
        /* null matches both alternatives, so no value passes the oneOf (anyOf is fine: below) */
        {"{'oneOf':[{'$ref':'#/$defs/N'},{'$ref':'#/$defs/N'}],'$defs':{'N':{'type':'null'}}}",
         "schema: alternatives overlap"},
        {"{'oneOf':[{'$ref':'#/$defs/N'},{'anyOf':[{'$ref':'#/$defs/N'},{'type':'string'}]}],"
         "'$defs':{'N':{'type':'null'}}}",
         "schema: alternatives overlap"},
        {"{'type':'object','properties':{'a':{'type':'null'}},'required':['a','a']}",
         "schema: 'required' lists more names than 'properties' has"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        sd_jschema *s = (sd_jschema *)&cases; /* must stay untouched */
        sd_diag d = {0};
        const char *json = q(cases[k].schema);
        int rc = sd_jschema_compile(&s, json, strlen(json), &d);
        CHECK_MSG(rc == SD_EINVAL && d.code == SD_EINVAL, "case %zu (%s): rc %d", k, json, rc);
        CHECK_MSG(strstr(d.msg, cases[k].msg), "case %zu: message '%s', want '%s'", k, d.msg, cases[k].msg);
        CHECK_MSG(s == (sd_jschema *)&cases, "case %zu: *ret written on failure", k);
    }
    sd_jschema_free(NULL);
}

/* The state: 16 bytes and 3 per level of nesting the schema allows, rounded up to 8. */
static void test_compile_sizes(void)
{
    static const struct {
        const char *schema;
        size_t size;
    } cases[] = {
        {person, 24},                                          /* 2 levels */
        {tree, 16 + 3 * SD_JSCHEMA_MAX_DEPTH},                 /* recursive: the limit */
        {anyof, 24},                                           /* array, point object */
        {str13, 16},                                           /* no container */
        {"{'type':'object','additionalProperties':true}", 24}, /* {} only */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        sd_jschema *s = compile_ok(cases[k].schema);
        CHECK_MSG(s && sd_jschema_state_size(s) == cases[k].size, "case %zu: %zu bytes", k,
                  s ? sd_jschema_state_size(s) : 0);
        sd_jschema_free(s);
    }
    for (size_t k = 0; k < N_SCHEMAS; k++) {
        sd_jschema *s = compile_ok(all_schemas[k]);
        CHECK(s && sd_jschema_state_size(s) % 8 == 0 && sd_jschema_state_size(s) <= SD_JSCHEMA_STATE_MAX);
        sd_jschema_free(s);
    }
}

/* ---- hand-written documents ------------------------------------------------------------------ */

/* How a text that is not rejected ends: a whole document (complete: nothing may follow), one that
 * may end or go on (a top-level number), a prefix that may not end. */
enum { DOC = -1, END = -2, PREFIX = -3 };

static const char age[] = "{'type':'integer','minimum':0,'maximum':150}";
static const char teens[] = "{'anyOf':[{'type':'integer','minimum':10,'maximum':20},"
                            "{'type':'object','properties':{'n':{'$ref':'#/anyOf/0'}}}]}";
static const char neg[] = "{'type':'integer','minimum':-20,'maximum':-10}";
static const char unit[] = "{'type':'number','minimum':0,'maximum':1}";

static const struct {
    const char *schema, *text;
    long reject; /* the index of the byte rejected, or DOC / END / PREFIX */
} doc_cases[] = {
    {person, "{'name':'Al','age':3,'tags':['a']}", DOC},
    {person,
     "{'name':'Al','age':-0,'email':null,'tags':['a','ab','b'],'address':{'city':'Paris'},"
     "'score':1.5e3,'ok':true}",
     DOC},
    {person, "{ 'name' : 'x\\u00e9\\n\\'' ,\n  'age': 10, 'tags': [ 'b' ] }", DOC},
    {person, "{'name':'','age':0,'email':'e@x','tags':['ab'],'address':{'city':'','zip':'9'}}", DOC},
    {person, "{'name':'x','age':1,'tags':['a'],'score':-0.5E-2}", DOC},
    {person, "{'nam':", 5},                                                   /* wrong key */
    {person, "{'age':1,'name':'x'}", 2},                                      /* a required key skipped */
    {person, "{'name':'x','age':1,'tags':['a'],'score':1,'email':null}", 44}, /* out of order */
    {person, "{'name':'x','name':'y'}", 13},                                  /* duplicate */
    {person, "{'name':'x','age':1}", 19},                                     /* missing required at '}' */
    {person, "{'name':'x','age':1,'tags':['a'],'zzz':1}", 34},                /* extra key */
    {person, "{'name':'x','age':1,'tags':['a'],'ok':true,}", 42},             /* ',' with no key left */
    {person, "{'name':'x','age':1,'tags':['a','a','a','a']}", 39},            /* maxItems */
    {person, "{'name':'x','age':1,'tags':[]}", 28},                           /* minItems */
    {person, "{'name':'x','age':1.5", 19},                                    /* integer with a fraction */
    {person, "{'name':'x','age':1e5", 19},                                    /* integer with an exponent */
    {person, "{'name':'x','age':01", 19},
    {person, "{'name':'x','age':1,'tags':['c']}", 29},       /* enum */
    {person, "{'name':'x','age':1,'tags':['abc']}", 31},     /* enum, a longer value */
    {person, "{'name':'x','age':1,'tags':['\\u0061']}", 29}, /* enum values only as written */
    {person, "{'name':'x','age':'1'}", 18},                  /* wrong type */
    {person, "{'name':null}", 8},
    {person, "{'name':'x','age':1,'email':1}", 28},
    {person, "{'name':'x','age':1,'tags':['a'],'ok':'true'}", 38},
    {person, "{'name':'x','age':1,'tags':['a'],'address':{'city':'Berlin'}}", 57}, /* maxLength */
    {person, "{'name':'x','age':1,'tags':['a'],'address':{}}", 44},                /* city required */
    {person, "{'name':'x','age':1,'tags':['a'],'address':{'zip':'1'}}", 45},
    {person, "{'name':'x','age':1,'tags':['a']} ", 33}, /* nothing after the end */
    {person, "[", 0},
    {tree,
     "{'value':1,'children':[{'value':2,'children':[]},{'value':3,'children':[{'value':4,'children':[]}]}]}",
     DOC},
    {tree, "{'value':1,'children':[{'value':2}]}", 33},
    {tree, "{'value':1,'children':[null]}", 23},
    {anyof, "[{'kind':'pt','x':1,'y':2.5},null,'ab',{'kind':'pt','x':-1}]", DOC},
    {anyof, "[]", DOC},
    {anyof, " \n[ null ]", DOC},
    {anyof, "['a']", 3},          /* minLength 2 */
    {anyof, "[true]", 1},         /* no alternative starts with 't' */
    {anyof, "[{'x':1}]", 3},      /* kind is required and first */
    {anyof, "[{'kind':'pb'", 11}, /* const */
    {anyof, "[null,null,null,null,null]", 20},
    {lits, "12", DOC},
    {lits, "1", END}, /* a top-level number */
    {lits, "-3.5", DOC},
    {lits, "0.1", DOC},
    {lits, "2.0", DOC},
    {lits, "'x\\'y'", DOC},
    {lits, "null", DOC},
    {lits, "13", 1},
    {lits, "2,", 1}, /* a prefix of 2.0 */
    {lits, "false", 0},
    {lits, "'y'", 1},
    {str13, "'\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80'", DOC}, /* 3 code points in 9 bytes */
    {str13, "'\\u00e9\\ud83d\\ude00x'", DOC},               /* escapes count as what they stand for */
    {str13, "''", 1},
    {str13, "'abcd'", 4},
    {str13, "'\\u00e9\\ud83d\\ude00x\\n'", 20},
    {str13, "'a\\ud800'", 8}, /* a high surrogate alone */
    {str13, "'\xc0\x80'", 1},
    {str13, "'\xe0\x80\x80'", 2},     /* overlong */
    {str13, "'\xed\xa0\x80'", 2},     /* a surrogate */
    {str13, "'\xf4\x90\x80\x80'", 2}, /* beyond U+10FFFF */
    {str13, "'\xf5'", 1},
    {nums, "[1,2,3.5,-4e+2,0]", DOC},
    {nums, "[1]", 2},
    {nums, "[1,]", 3},
    {keys, "{'ab':null,'abc':null,'req':[1,12,-3,1]}", DOC},
    {keys, "{'a':null,'abc':null,'req':[],'\xc3\xa9t\xc3\xa9':true,'':null}", DOC},
    {keys, "{'req':[12],'\xc3\xa9t\xc3\xa9':-7}", DOC},
    {keys, "{'ab':null,'ab':null}", 14}, /* after ab: abc or req */
    {keys, "{'abc':null,'a':null}", 13},
    {keys, "{'a':null,'\xc3\xa9t\xc3\xa9':true}", 11}, /* req comes first */
    {keys, "{'req':[13]}", 9},
    {keys, "{'req':[1.0]}", 9},
    {keys, "{'req':[],'\xc3\xa9t\xc3\xa9':1.5}", 19},
    {keys, "{'req':[1", PREFIX},
    {person, "{'name':'x','age':1,'tags':['a']", PREFIX},
    {lits, "-3.", PREFIX},
    {lits, "'x", PREFIX},
    {"{'type':'integer'}", "-", PREFIX},
    {"{'type':'integer'}", "-10", END},
    {"{'type':'number'}", "1.5e", PREFIX},
    {"{'type':'number'}", "1.5e7", END},
    {"{'type':['null','boolean']}", " null", DOC},
    /* integer bounds: a digit goes in only where the number can still end within them */
    {age, "0", END},
    {age, "150", END},
    {age, "42", END},
    {age, "-", PREFIX}, /* "-0" */
    {age, "-1", 1},     /* no negative integer is in range */
    {age, "151", 2},    /* 15 can still become 150 */
    {age, "1500", 3},
    {age, "16", END},
    {teens, "1", PREFIX}, /* only going on: 10-19 */
    {teens, "9", 0},
    {teens, "25", 1},
    {teens, "19", END},
    {teens, "{'n':1}", 6}, /* 1 ends outside [10, 20] */
    {neg, "-", PREFIX},
    {neg, "-1", PREFIX},
    {neg, "-15", END},
    {neg, "-9", 1},
    {neg, "-21", 2},
    {neg, "0", 0},
    {"{'type':'integer','exclusiveMinimum':0,'maximum':2.5}", "0", 0},
    {"{'type':'integer','exclusiveMinimum':0,'maximum':2.5}", "2", END},
    {"{'type':'integer','exclusiveMinimum':0,'maximum':2.5}", "3", 0},
    {"{'type':'integer','minimum':-0.5,'exclusiveMaximum':1}", "-0", END},
    {"{'type':'integer','minimum':-9223372036854775808}", "-9223372036854775808", END},
    {"{'type':'integer','minimum':-9223372036854775808}", "-9223372036854775809", 19},
    {"{'type':'integer','maximum':9223372036854775807}", "9223372036854775808", 18},
    {"{'type':'integer','maximum':9223372036854775807}", "18446744073709551615", 19},
    /* number bounds: fractions within them, no exponent, the sign only where "-0" or a negative fits */
    {unit, "0.5", END},
    {unit, "1", END},
    {unit, "1.0", END},
    {unit, "1.5", 2},
    {unit, "2", 0},
    {unit, "-0.0", END},
    {unit, "-0.1", 3},
    {unit, "1e0", 1},
    {unit, "0.", PREFIX},
    {"{'type':'number','exclusiveMinimum':0.1}", "0.1", PREFIX}, /* 0.1 itself is out: 0.11 is in */
    {"{'type':'number','exclusiveMinimum':0.1}", "0.11", END},
    {"{'type':'number','exclusiveMinimum':0.1}", "0.09", 2}, /* 0.0x never passes 0.1 */
    {"{'type':'number','maximum':-2.5}", "-2.5", END},
    {"{'type':'number','maximum':-2.5}", "-2.4", 3},
    {"{'type':'number','maximum':-2.5}", "-3", END},
    {"{'type':'number','maximum':-2.5}", "2", 0},
    {"{'type':'object','properties':{'p':{'type':'number','minimum':0,'maximum':1}},'required':['p']}",
     "{'p':0.75}", DOC},
    {"{'type':'object','properties':{'p':{'type':'number','minimum':0,'maximum':1}},'required':['p']}",
     "{'p':1.25}", 7},
    /* a magnitude past 48 bits, then more values: the state's high bits are cleared with it */
    {"{'type':'array','items':{'type':'integer','minimum':0}}", "[281474976710656,1,2]", DOC},
    {"{'type':'object','properties':{'n':{'type':'integer','minimum':18}},'required':['n']}", "{'n':17}", 7},
    {"{'type':'object','properties':{'n':{'type':'integer','minimum':18}},'required':['n']}", "{'n':180}",
     DOC},
    {"{'anyOf':[{'$ref':'#/$defs/N'},{'$ref':'#/$defs/N'}],'$defs':{'N':{'type':'null'}}}", "null", DOC},
};

/* Each text fed byte by byte is rejected where expected (or not at all); whole texts and random
 * pieces end as expected; nothing is accepted after a complete document. */
static void test_documents(void)
{
    uint64_t rng = 5;
    for (size_t k = 0; k < sizeof doc_cases / sizeof *doc_cases; k++) {
        sd_jschema *s = compile_ok(doc_cases[k].schema);
        if (!s)
            continue;
        const char *t = q(doc_cases[k].text);
        size_t n = strlen(t);
        long at = reject_at(s, t), want = doc_cases[k].reject;
        CHECK_MSG(at == (want >= 0 ? want : -1), "case %zu (%s): rejected at %ld, want %ld", k, t, at, want);
        tstate st;
        sd_jschema_init(s, &st);
        int fed = sd_jschema_feed(s, &st, t, n) == 0;
        CHECK_MSG(fed == (want < 0), "case %zu whole", k);
        CHECK_MSG(!fed || sd_jschema_complete(s, &st) == (want == DOC), "case %zu complete", k);
        CHECK_MSG(!fed || sd_jschema_can_end(s, &st) == (want == DOC || want == END), "case %zu can_end", k);
        for (int rep = 0; rep < 20 && want < 0; rep++)
            CHECK_MSG(accepts(s, t, n, &rng, rep ? 6 : 1) == (want != PREFIX), "case %zu in pieces", k);
        for (int c = 0; c < 256 && want == DOC; c++) {
            char b = (char)c;
            CHECK_MSG(sd_jschema_feed(s, &st, &b, 1) == -1, "case %zu: byte %d after the end", k, c);
        }
        sd_jschema_free(s);
    }
}

/* A bounded integer keeps its magnitude in the state while it is read, and nothing of it after:
 * the same place after a large and a small one gives the same bytes (the mask caches by them). */
static void test_int_canonical(void)
{
    sd_jschema *s = compile_ok("{'type':'array','items':{'type':'integer','minimum':0}}");
    REQUIRE(s);
    tstate a, b;
    sd_jschema_init(s, &a);
    sd_jschema_init(s, &b);
    CHECK(sd_jschema_feed(s, &a, "[281474976710656,", 17) == 0 && sd_jschema_feed(s, &b, "[1,", 3) == 0);
    CHECK(memcmp(&a, &b, sd_jschema_state_size(s)) == 0);
    CHECK(sd_jschema_feed(s, &a, "12", 2) == 0 && sd_jschema_feed(s, &b, "13", 2) == 0);
    CHECK(memcmp(&a, &b, sd_jschema_state_size(s)) != 0); /* inside one, its digits matter */
    sd_jschema_free(s);
}

/* Runs of 32 whitespace bytes pass between tokens, 33 do not; inside strings spaces are text. */
static void test_whitespace_limit(void)
{
    static const char *const before[] = {"",
                                         "{",
                                         "{'name'",
                                         "{'name':",
                                         "{'name':'x'",
                                         "{'name':'x','age':12",
                                         "{'name':'x','age':1,'tags':["};
    sd_jschema *s = compile_ok(person);
    REQUIRE(s);
    char ws[SD_JSCHEMA_MAX_WS + 1];
    for (int i = 0; i < SD_JSCHEMA_MAX_WS + 1; i++)
        ws[i] = " \t\n\r"[i % 4];
    tstate st, ok;
    for (size_t k = 0; k < sizeof before / sizeof *before; k++) {
        REQUIRE(feed_from_start(s, &st, before[k]) == 0);
        ok = st;
        CHECK_MSG(sd_jschema_feed(s, &ok, ws, SD_JSCHEMA_MAX_WS) == 0, "after '%s'", before[k]);
        CHECK_MSG(sd_jschema_feed(s, &ok, " ", 1) == -1, "33 bytes after '%s'", before[k]);
        CHECK_MSG(sd_jschema_feed(s, &st, ws, SD_JSCHEMA_MAX_WS + 1) == -1, "after '%s'", before[k]);
    }
    char text[300] = "{'name':'";
    memset(text + 9, ' ', 200);
    strcpy(text + 209, "'");
    CHECK(feed_from_start(s, &st, text) == 0);
    sd_jschema_free(s);
}

/* The tree allows 32 containers: 16 levels of node + children; the 17th node is rejected. */
static void test_depth_limit(void)
{
    sd_jschema *s = compile_ok(tree);
    REQUIRE(s);
    char text[2048];
    size_t n = 0;
    for (int d = 0; d < SD_JSCHEMA_MAX_DEPTH / 2; d++)
        n += (size_t)sprintf(text + n, "{'value':%d,'children':[", d);
    tstate st;
    REQUIRE(feed_from_start(s, &st, text) == 0);
    CHECK(sd_jschema_feed(s, &st, "{", 1) == -1);
    for (int d = 0; d < SD_JSCHEMA_MAX_DEPTH / 2; d++)
        CHECK(!sd_jschema_complete(s, &st) && sd_jschema_feed(s, &st, "]}", 2) == 0);
    CHECK(sd_jschema_complete(s, &st));
    sd_jschema_free(s);
}

/* Near the depth limit a container, key or element is taken only if what it needs inside fits:
 * 'b' needs two more levels, 'a' one. Without that, 32 times {'a': left no byte to take. */
static const char deep[] = "{'type':'object','properties':{'a':{'$ref':'#'},'b':{'type':'array','items':"
                           "{'type':'array','items':{'type':'null'},'minItems':1},'minItems':1}}}";

/* Whether a copy of st takes text (q'd). */
static int takes(const sd_jschema *s, const tstate *st, const char *text)
{
    tstate c = *st;
    text = q(text);
    return sd_jschema_feed(s, &c, text, strlen(text)) == 0;
}

static void test_depth_no_dead_end(void)
{
    sd_jschema *s = compile_ok(deep);
    REQUIRE(s);
    char text[512] = "";
    for (int d = 1; d < SD_JSCHEMA_MAX_DEPTH; d++) /* d objects open, then one more: d + 1 */
        strcat(text, "{'a':");
    tstate st, c;
    REQUIRE(feed_from_start(s, &st, text) == 0);
    CHECK(sd_jschema_feed(s, &st, "{", 1) == 0); /* the 32nd container */
    CHECK(!takes(s, &st, "'"));                  /* no key fits below it */
    CHECK(sd_jschema_feed(s, &st, "}", 1) == 0); /* but it may close */
    for (int d = 1; d < SD_JSCHEMA_MAX_DEPTH; d++)
        CHECK(!sd_jschema_complete(s, &st) && sd_jschema_feed(s, &st, "}", 1) == 0);
    CHECK(sd_jschema_complete(s, &st));
    /* at depth 31 only 'a' (one level) fits; at depth 30 'b' (two) does too */
    strcpy(text + strlen(text) - 5, "{'"); /* 30 times {'a': then {' */
    REQUIRE(feed_from_start(s, &st, text) == 0);
    CHECK(!takes(s, &st, "b") && takes(s, &st, "a"));
    strcpy(text + strlen(text) - 7, "{'"); /* 29 times */
    REQUIRE(feed_from_start(s, &st, text) == 0);
    CHECK(takes(s, &st, "b':[[null]]}"));
    sd_jschema_free(s);

    /* random walks that open containers eagerly: every prefix taken has a next byte or may end,
     * and what ends is valid */
    static const char *const schemas[] = {
        deep,
        tree,
        "{'anyOf':[{'type':'null'},{'type':'array','items':{'$ref':'#'},'minItems':2,'maxItems':3}]}",
        "{'type':'object','properties':{'z':{'type':'null'},"
        "'x':{'type':'object','properties':{'y':{'$ref':'#'}},'required':['y']}}}",
    };
    uint64_t rng = 77;
    for (size_t k = 0; k < sizeof schemas / sizeof *schemas; k++) {
        s = compile_ok(schemas[k]);
        json_t *root = json_loads(q(schemas[k]), 0, NULL);
        REQUIRE(s && root);
        int n_deep = 0;
        for (int walk = 0; walk < 200; walk++) {
            char t[4096];
            size_t n = 0;
            sd_jschema_init(s, &st);
            while (!sd_jschema_complete(s, &st) && n < sizeof t - 1) {
                char ok[256];
                int n_ok = 0;
                for (int b = 0; b < 256; b++) {
                    c = st;
                    if (sd_jschema_step(s, &c, (unsigned)b) == 0)
                        ok[n_ok++] = (char)b;
                }
                if (!n_ok) {
                    CHECK_MSG(sd_jschema_can_end(s, &st), "schema %zu: dead end after %.*s", k, (int)n, t);
                    break;
                }
                /* mostly open something, or start a key that does */
                char b = ok[rnd(&rng, (unsigned)n_ok)];
                for (int i = 0, open = rnd(&rng, 16) != 0; open && i < n_ok; i++)
                    b = strchr("{[\"ax", ok[i]) ? ok[i] : b;
                if (n > 1500) /* then close */
                    for (int i = 0; i < n_ok; i++)
                        b = strchr("}]\"", ok[i]) || (ok[i] == 'n' && b != '}' && b != ']') ? ok[i] : b;
                sd_jschema_step(s, &st, (unsigned char)b);
                t[n++] = b;
                n_deep += st.h.depth >= SD_JSCHEMA_MAX_DEPTH - 1; /* the last schema's x needs two */
            }
            if (sd_jschema_complete(s, &st)) /* -1: a number too large for jansson */
                CHECK_MSG(ref_valid(root, t, n) != 0, "schema %zu: %.*s", k, (int)n, t);
        }
        CHECK_MSG(n_deep > 0, "schema %zu never reached the limit", k);
        json_decref(root);
        sd_jschema_free(s);
    }
}

/* Messages stay valid UTF-8 (the server sends them in JSON strings) and leave room for a
 * caller's prefix, however long the names they quote. */
static void test_message_utf8(void)
{
    static char name[3000], json[8000];
    memset(name, 'x', 3);
    for (int i = 0; i < 1000; i++)
        memcpy(name + 3 + 2 * i, "\xc3\xa9", 2);
    const char *const fmts[] = {
        "{\"type\":\"object\",\"properties\":{\"%s\":{\"type\":\"null\",\"minimum\":1}}}",
        "{\"type\":\"object\",\"properties\":{\"%s\\\"\":{\"type\":\"null\"}}}", /* needs escaping */
        "{\"$ref\":\"#/$defs/%s\"}",                                             /* not found */
    };
    for (size_t k = 0; k < sizeof fmts / sizeof *fmts; k++)
        for (size_t cut = 0; cut < 2; cut++) { /* 0 or 1 x first: both alignments of the characters */
            snprintf(json, sizeof json, fmts[k], name + 3 - cut);
            sd_jschema *s = NULL;
            sd_diag d = {0};
            CHECK(sd_jschema_compile(&s, json, strlen(json), &d) == SD_EINVAL);
            json_t *m = json_string(d.msg);
            CHECK_MSG(m, "case %zu/%zu: not UTF-8: %s", k, cut, d.msg);
            CHECK_MSG(strlen(d.msg) <= SD_DIAG_MSG_MAX - 32, "case %zu: %zu bytes", k, strlen(d.msg));
            CHECK_MSG(k != 0 || strstr(d.msg, "'minimum' needs"), "case %zu: %s", k, d.msg);
            json_decref(m);
        }
}

/* $defs chained thousands deep (listed deepest first, so compiling them nests little) on a small
 * stack: link's passes must not recurse along the chain. Also a long $ref chain. */
static void *compile_chain(void *arg)
{
    int kind = *(int *)arg, n = 6000;
    size_t cap = (size_t)n * 96 + 64, len = 0;
    char *json = malloc(cap);
    if (!json)
        return NULL;
    len += (size_t)snprintf(json + len, cap - len, "{\"$ref\":\"#/$defs/D0\",\"$defs\":{");
    for (int i = n - 1; i >= 0; i--) {
        const char *sep = i ? "," : "";
        if (i == n - 1)
            len += (size_t)snprintf(json + len, cap - len, "\"D%d\":{\"type\":\"null\"}%s", i, sep);
        else if (kind == 0)
            len += (size_t)snprintf(
                json + len, cap - len,
                "\"D%d\":{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/D%d\"}}}%s", i, i + 1,
                sep);
        else
            len += (size_t)snprintf(json + len, cap - len, "\"D%d\":{\"$ref\":\"#/$defs/D%d\"}%s", i, i + 1,
                                    sep);
    }
    len += (size_t)snprintf(json + len, cap - len, "}}");
    sd_jschema *s = NULL;
    sd_diag d = {0};
    int rc = sd_jschema_compile(&s, json, len, &d);
    CHECK_MSG(rc == 0, "chain %d: %s", kind, sd_diag_str(&d, rc));
    if (s)
        CHECK_MSG(sd_jschema_state_size(s) == (kind == 0 ? 16 + 3 * SD_JSCHEMA_MAX_DEPTH : 16),
                  "chain %d: %zu", kind, sd_jschema_state_size(s));
    sd_jschema_free(s);
    free(json);
    return NULL;
}

static void test_long_chains(void)
{
    for (int kind = 0; kind < 2; kind++) {
        pthread_attr_t at;
        pthread_t th;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 512 << 10);
        REQUIRE(pthread_create(&th, &at, compile_chain, &kind) == 0);
        pthread_join(th, NULL);
        pthread_attr_destroy(&at);
    }
}

int main(void)
{
    RUN(test_compile_errors);
    RUN(test_compile_sizes);
    RUN(test_documents);
    RUN(test_int_canonical);
    RUN(test_whitespace_limit);
    RUN(test_depth_limit);
    RUN(test_depth_no_dead_end);
    RUN(test_message_utf8);
    RUN(test_long_chains);
    return sd_test_done();
}
