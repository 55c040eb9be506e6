package standalone

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authzunion "k8s.io/apiserver/pkg/authorization/union"

	"github.com/eventapiserver/event-apiserver/pkg/publicinfo"
)

// AdminUser is who the generated token authenticates as. Membership of
// system:masters is what grants every permission, as in kube-apiserver.
const AdminUser = "event-apiserver-admin"

const tokenFile = "admin-token"

// LoadOrCreateAdminToken returns the admin bearer token kept in dataDir,
// generating it on first start so that kubeconfigs handed out before a
// restart keep working after it.
func LoadOrCreateAdminToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, tokenFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		token := strings.TrimSpace(string(data))
		if token == "" {
			return "", fmt.Errorf("admin token file %s is empty: delete it to generate a new token", path)
		}
		return token, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("reading admin token: %w", err)
	}

	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generating admin token: %w", err)
	}
	token := hex.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing admin token: %w", err)
	}
	return token, nil
}

// NewAuthenticator accepts the admin token, and anonymous callers on the
// public paths only (publicinfo). Other requests without the token get no
// user, which the server answers with 401; a wrong token gets 401 on every
// path, as kube-apiserver answers a token no authenticator accepts.
func NewAuthenticator(adminToken string) authenticator.Request {
	return union.NewFailOnError(newTokenAuthenticator(adminToken), publicinfo.NewAnonymousAuthenticator())
}

func newTokenAuthenticator(adminToken string) authenticator.Request {
	admin := &user.DefaultInfo{
		Name:   AdminUser,
		Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated},
	}
	return bearertoken.New(authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		if subtle.ConstantTimeCompare([]byte(token), []byte(adminToken)) != 1 {
			return nil, false, nil
		}
		return &authenticator.Response{User: admin}, true, nil
	}))
}

// NewAuthorizer allows system:masters everything, everyone get on the
// public paths, and has no opinion on anything else, which the server
// treats as forbidden.
func NewAuthorizer() (authorizer.Authorizer, authorizer.RuleResolver) {
	privileged := authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)
	return authzunion.New(privileged, publicinfo.NewAuthorizer()), authzunion.NewRuleResolvers()
}
