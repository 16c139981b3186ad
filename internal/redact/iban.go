package redact

// ibanLengths is the length of an IBAN in each country that issues them;
// a candidate from elsewhere, or of another length, is not one.
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
	"BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
	"ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
	"HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
	"LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
	"MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
	"RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}

// scanIBANs finds IBANs: a country code, two check digits and the account,
// as one run or in groups of four split by single spaces, of the
// country's length and passing the ISO 13616 mod-97 check.
func scanIBANs(dst []span, text string, d int) []span {
	for i := 0; i+15 <= len(text); i++ {
		if !isUpper(text[i]) || !isUpper(text[i+1]) || !isDigit(text[i+2]) || !isDigit(text[i+3]) || wordByte(before(text, i)) {
			continue
		}
		want, ok := ibanLengths[text[i:i+2]]
		if !ok {
			continue
		}
		var buf [34]byte
		n, end := 0, i
		for end < len(text) && n < want {
			c := text[end]
			switch {
			case isDigit(c) || isUpper(c):
				buf[n] = c
				n++
			case c == ' ' && n%4 == 0 && n > 0 && (isDigit(at(text, end+1)) || isUpper(at(text, end+1))):
			default:
				end = len(text) + 1
				continue
			}
			end++
		}
		if n == want && end <= len(text) && !wordByte(at(text, end)) && mod97(buf[:n]) == 1 {
			dst = append(dst, span{i, end, d})
			i = end - 1
		}
	}
	return dst
}

// mod97 is the IBAN's remainder: its first four characters moved to the
// end, letters read as 10–35.
func mod97(iban []byte) int {
	r := 0
	for k := range iban {
		c := iban[(k+4)%len(iban)]
		if isDigit(c) {
			r = (r*10 + int(c-'0')) % 97
		} else {
			r = (r*100 + int(c-'A') + 10) % 97
		}
	}
	return r
}
