// The identity the door forwards (see nginx.conf and docs/front-door.md).
//
// nginx gives the verified client certificate's subject as an RFC 2253
// string ($ssl_client_s_dn): attributes most specific first, separated by
// "," (or "+" inside a multi-valued RDN, which is how Go writes several
// O's), with ",+\"\\<>;" escaped by a backslash and every byte that is not
// printable ASCII (UTF-8 included) escaped as \XX. kube-apiserver reads the
// same certificate as user = CN, groups = every O, so this parser undoes
// exactly those escapes; anything it cannot turn into the same identity is
// refused rather than guessed.

// maxGroups is how many X-Remote-Group lines nginx.conf sets, one per O.
var maxGroups = 8;

function parseDN(dn) {
    var attrs = [];
    var i = 0;
    while (i < dn.length) {
        var eq = dn.indexOf('=', i);
        if (eq < 0) {
            return null;
        }
        var type = dn.substring(i, eq);
        i = eq + 1;
        // "#hex" is a value OpenSSL could not print as a string; Go does
        // not read such a CN or O either.
        var dumped = dn.charAt(i) === '#';
        var bytes = [];
        while (i < dn.length && dn.charAt(i) !== ',' && dn.charAt(i) !== '+') {
            var c = dn.charAt(i);
            if (c !== '\\') {
                bytes.push(dn.charCodeAt(i));
                i++;
                continue;
            }
            var hex = dn.substring(i + 1, i + 3);
            if (/^[0-9A-Fa-f]{2}$/.test(hex)) {
                bytes.push(parseInt(hex, 16));
                i += 3;
            } else if (i + 1 < dn.length) {
                bytes.push(dn.charCodeAt(i + 1));
                i += 2;
            } else {
                return null;
            }
        }
        attrs.push({type: type, value: Buffer.from(bytes).toString('utf8'), dumped: dumped});
        i++;
    }
    return attrs;
}

// identity is {user, groups} for a verified certificate, {} when the door
// forwards none (no verified certificate, or no CN: kube-apiserver then
// falls back to the bearer token too), or {refusal} when the certificate
// names an identity headers cannot carry.
function identity(r) {
    if (r.variables.ssl_client_verify !== 'SUCCESS') {
        return {};
    }
    var attrs = parseDN(r.variables.ssl_client_s_dn || '');
    if (attrs === null) {
        return {refusal: 'the door cannot read the client certificate subject'};
    }
    var cns = [], groups = [];
    for (var i = 0; i < attrs.length; i++) {
        var a = attrs[i];
        if (a.type !== 'CN' && a.type !== 'O') {
            continue;
        }
        if (a.dumped || /[\x00-\x1f\x7f]/.test(a.value)) {
            return {refusal: 'the client certificate has a ' + a.type + ' the door cannot pass on as a header'};
        }
        if (a.type === 'CN') {
            cns.push(a.value);
        } else if (a.value !== '') {
            groups.push(a.value);
        }
    }
    if (cns.length > 1) {
        return {refusal: 'the client certificate has more than one CN'};
    }
    if (groups.length > maxGroups) {
        return {refusal: 'the client certificate has more than ' + maxGroups + ' O (groups); the door passes at most ' + maxGroups};
    }
    if (cns.length === 0 || cns[0] === '') {
        return {};
    }
    return {user: cns[0], groups: groups};
}

// refusal is why the door answers 403 itself, or "": a client that sends
// any X-Remote-* header (nginx cannot strip headers by prefix, and an
// X-Remote-Extra-* beside the door's own X-Remote-User would add to a
// certificate user's identity), or a certificate identity the door cannot
// carry.
function refusal(r) {
    var raw = r.rawHeadersIn;
    for (var i = 0; i < raw.length; i++) {
        if (raw[i][0].toLowerCase().indexOf('x-remote-') === 0) {
            return 'the door does not accept X-Remote-* headers from clients (' + raw[i][0] + ')';
        }
    }
    return identity(r).refusal || '';
}

function user(r) {
    return identity(r).user || '';
}

// credentialID is what kube-apiserver puts in the user's extra
// authentication.kubernetes.io/credential-id for a certificate (audit logs
// name the certificate by it): X509SHA256= and the SHA-256 of its DER.
function credentialID(r) {
    if (!identity(r).user) {
        return '';
    }
    var pem = r.variables.ssl_client_raw_cert || '';
    var b64 = pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
    var der = Buffer.from(b64, 'base64');
    return 'X509SHA256=' + require('crypto').createHash('sha256').update(der).digest('hex');
}

function group(n) {
    return function (r) {
        var groups = identity(r).groups || [];
        return groups[n - 1] || '';
    };
}

export default {
    refusal: refusal, user: user, credentialID: credentialID,
    group1: group(1), group2: group(2), group3: group(3), group4: group(4),
    group5: group(5), group6: group(6), group7: group(7), group8: group(8),
};
