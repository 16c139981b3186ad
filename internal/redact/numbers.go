package redact

// scanNumbers finds, in one pass over the numbers in text, the values of
// the enabled detectors that are made of digits: mainland-China ID
// numbers, payment cards, mainland-China mobile numbers and IPv4
// addresses. A number starts at a digit not glued to a word (no letter,
// digit or _ before it); a value may start at any group of a longer run,
// so "No. 12 4111 1111 1111 1111" offers a card from its second group on.
func (p *Policy) scanNumbers(dst []span, text string) []span {
	cnID, card, mobile, ipv4 := p.actions[CNID] != None, p.actions[Card] != None, p.actions[Phone] != None, p.actions[IPv4] != None
	if !cnID && !card && !mobile && !ipv4 {
		return dst
	}
	for i := 0; i < len(text); i++ {
		if !isDigit(text[i]) || wordByte(before(text, i)) {
			continue
		}
		if end, ok := cnIDAt(text, i); cnID && ok {
			dst = append(dst, span{i, end, CNID})
		}
		if end, ok := ipv4At(text, i); ipv4 && ok {
			dst = append(dst, span{i, end, IPv4})
		}
		if card || mobile {
			g := readGroups(text, i)
			if end, ok := g.longest(text, cardNumber); card && ok {
				dst = append(dst, span{i, end, Card})
			}
			if end, ok := g.longest(text, mobileNumber); mobile && ok {
				dst = append(dst, span{i, end, Phone})
			}
		}
	}
	return dst
}

// cnIDAt returns the end of the mainland-China resident ID number that
// starts at i, if one does.
func cnIDAt(text string, i int) (int, bool) {
	j := i
	for j < len(text) && j-i < 18 && isDigit(text[j]) {
		j++
	}
	if j-i == 17 && (at(text, j) == 'X' || at(text, j) == 'x') {
		j++
	}
	return j, j-i == 18 && !wordByte(at(text, j)) && validCNID(text[i:j])
}

// ipv4At returns the end of the IPv4 address (a dotted quad of 0–255
// without leading zeros) that starts at i, if one does and it is not part
// of a longer dotted run (a version number like 1.2.3.4.5).
func ipv4At(text string, i int) (int, bool) {
	if before(text, i) == '.' {
		return 0, false
	}
	end, ok := dottedQuad(text, i)
	return end, ok && !wordByte(at(text, end)) && !(at(text, end) == '.' && isDigit(at(text, end+1)))
}

// maxGroups bounds the digit groups of one number; a longer run is cut.
const maxGroups = 8

// digitGroups are the groups of digits of a number, split by single
// spaces or single dashes (one kind per number), as [start, end) spans.
type digitGroups struct {
	bounds [maxGroups][2]int
	n      int
}

// readGroups reads the groups of the number starting at i; a last group
// glued to a word is not part of it.
func readGroups(text string, i int) digitGroups {
	var g digitGroups
	var sep byte
	for j := i; g.n < maxGroups; {
		start := j
		for j < len(text) && isDigit(text[j]) {
			j++
		}
		g.bounds[g.n] = [2]int{start, j}
		g.n++
		c := at(text, j)
		if (c != ' ' && c != '-') || (sep != 0 && c != sep) || !isDigit(at(text, j+1)) {
			break
		}
		sep = c
		j++
	}
	if wordByte(at(text, g.bounds[g.n-1][1])) {
		g.n--
	}
	return g
}

// numberKind is what digitGroups.longest looks for.
type numberKind uint8

const (
	cardNumber numberKind = iota
	mobileNumber
)

// minDigits is the fewest digits a number of the kind has.
func (k numberKind) minDigits() int {
	if k == cardNumber {
		return 13
	}
	return 11
}

func (k numberKind) is(digits []byte, sizes []int) bool {
	if k == cardNumber {
		return len(digits) >= 13 && len(digits) <= 19 && cardGroups(sizes) && cardPrefix(digits) && luhn(digits)
	}
	return cnMobile(digits, sizes)
}

// longest returns the end of the longest number of kind k made of the
// first groups of g, if there is one.
func (g *digitGroups) longest(text string, k numberKind) (int, bool) {
	total := 0
	for _, b := range g.bounds[:g.n] {
		total += b[1] - b[0]
	}
	var digits [40]byte
	var sizes [maxGroups]int
	for last := g.n - 1; last >= 0 && total >= k.minDigits(); last-- {
		nd := 0
		for n, b := range g.bounds[:last+1] {
			if nd+b[1]-b[0] > len(digits) {
				nd = -1
				break
			}
			nd += copy(digits[nd:], text[b[0]:b[1]])
			sizes[n] = b[1] - b[0]
		}
		if nd >= 0 && k.is(digits[:nd], sizes[:last+1]) {
			return g.bounds[last][1], true
		}
		total -= g.bounds[last][1] - g.bounds[last][0]
	}
	return 0, false
}
